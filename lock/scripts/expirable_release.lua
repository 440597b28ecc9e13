-- Give back the permit named ARGV[6] of a PermitExpirableSemaphore and
-- wake the waiters (Redisson's RPermitExpirableSemaphore.release(id));
-- with ARGV[7] = 'cancel', the permit's own acquisition is given up by a
-- caller who does not know its outcome: it is given back if taken, and
-- marked 'X' either way so that a first run arriving late takes nothing
-- (expirable_acquire.lua). KEYS, ARGV[1..5]: attempts.lua, leases.lua
-- (a cancel runs with the acquisition's attempt id).
-- Returns '1' when given back, '0' when the permit was not taken (released
-- already, its lease ended, or never taken); run again, what the first
-- run returned.
-- give returns 1 when the permit was taken and is given back, else 0.
local function give()
    reclaim(nowMs())
    local given = redis.call('zrem', KEYS[4], ARGV[6])
    if given == 1 then
        redis.call('incr', KEYS[1])
        redis.call(ARGV[5], ARGV[4], 'u')
    end
    return given
end
local done = recorded()
if ARGV[7] == 'cancel' then
    if done ~= 'X' then
        give()
        record('X')
    end
    return 'X'
end
if done then
    return done
end
return record(tostring(give()))
