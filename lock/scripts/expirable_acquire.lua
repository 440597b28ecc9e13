-- Take ARGV[6] permits of a PermitExpirableSemaphore, each leased for
-- ARGV[3] ms and named after the attempt id ARGV[1] (leases.lua, permitId;
-- Redisson's RPermitExpirableSemaphore.tryAcquire(permits, waitTime,
-- leaseTime)): the permits whose lease ended come back first. KEYS, ARGV:
-- attempts.lua, leases.lua.
-- Returns 'OK' when taken, also when this attempt took them before; 'X'
-- when its caller gave it up (expirable_release.lua): a late run takes
-- nothing; else {the permits free, the ms until the first lease ends (-1:
-- no lease)}: the longest a waiter sleeps without a message.
local done = recorded()
if done then
    return done
end
local now = nowMs()
reclaim(now)
local n = tonumber(ARGV[6])
local have = tonumber(redis.call('get', KEYS[1]) or '0')
if have < n then
    return {have, nextEnd(now)}
end
redis.call('decrby', KEYS[1], n)
local ends = now + tonumber(ARGV[3])
for i = 1, n do
    redis.call('zadd', KEYS[4], ends, permitId(ARGV[1], i, n))
end
return record('OK')
