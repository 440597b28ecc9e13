-- Take ARGV[3] permits of the semaphore KEYS[1] when it has as many
-- (Redisson's RSemaphore.tryAcquire). ARGV[1..2]: attempts.lua.
-- Returns 'OK' when taken, also when this attempt took them before (a
-- re-sent request takes nothing more); 'X' when its caller gave the
-- attempt up (semaphore_cancel.lua): a late run takes nothing; else the
-- permits available, as a number.
local done = recorded()
if done then
    return done
end
local n = tonumber(ARGV[3])
local have = tonumber(redis.call('get', KEYS[1]) or '0')
if have < n then
    return have
end
redis.call('decrby', KEYS[1], n)
return record('OK')
