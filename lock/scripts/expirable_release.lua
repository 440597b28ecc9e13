-- Give back the permit named ARGV[6] of a PermitExpirableSemaphore and
-- wake the waiters (Redisson's RPermitExpirableSemaphore.release(id));
-- with ARGV[7] = 'cancel', the acquisition of the ARGV[8] permits of the
-- attempt ARGV[6] is given up by a caller who does not know its outcome:
-- those taken are given back, and the attempt is marked 'X' either way so
-- that a first run arriving late takes nothing (expirable_acquire.lua).
-- KEYS, ARGV[1..5]: attempts.lua, leases.lua (a cancel runs with the
-- acquisition's attempt id).
-- Returns '1' when given back, '0' when the permit was not taken (released
-- already, its lease ended, or never taken); run again, what the first
-- run returned.
-- give gives back the permits named ids that are taken, wakes the
-- waiters if any was, and returns how many.
local function give(ids)
    reclaim(nowMs())
    local given = redis.call('zrem', KEYS[4], unpack(ids))
    if given > 0 then
        wake(redis.call('incrby', KEYS[1], given))
    end
    return given
end
local done = recorded()
if ARGV[7] == 'cancel' then
    if done ~= 'X' then
        local n = tonumber(ARGV[8])
        local ids = {}
        for i = 1, n do
            ids[i] = permitId(ARGV[6], i, n)
        end
        give(ids)
        record('X')
    end
    return 'X'
end
if done then
    return done
end
return record(tostring(give({ARGV[6]})))
