-- Take the permits named ARGV[6..] of a PermitExpirableSemaphore out of it
-- for good: their leases end without giving them back, so the semaphore
-- shrinks by as many, in one step (a sale's permits once its order stands;
-- AddPermits(-n) then Release of each would let the available permits read
-- n fewer than there are between the two). A permit whose lease ended is
-- back among the available ones and is left there: the caller learns it
-- from the count. KEYS, ARGV[1..5]: attempts.lua, leases.lua.
-- Returns how many of the permits were taken and are consumed; run again,
-- what the first run returned.
local done = recorded()
if done then
    return done
end
reclaim(nowMs())
local ids = {}
for i = 6, #ARGV do
    ids[#ids + 1] = ARGV[i]
end
return record(tostring(redis.call('zrem', KEYS[4], unpack(ids))))
