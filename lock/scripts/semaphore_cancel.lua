-- Give up an acquisition whose outcome its caller does not know (its reply
-- was lost, or its context ended while it ran): the ARGV[3] permits go back
-- when it took them, and it is marked 'X' either way, so that a first run
-- arriving late takes nothing (semaphore_acquire.lua). ARGV[1..2]: the
-- attempt's, attempts.lua; ARGV[4..5]: semaphore_add.lua. Returns 'OK'; run
-- again it gives nothing back twice.
local done = recorded()
if done == 'OK' then
    local free = redis.call('incrby', KEYS[1], ARGV[3])
    redis.call(ARGV[5], ARGV[4], 'u' .. free)
end
if done ~= 'X' then
    record('X')
end
return 'OK'
