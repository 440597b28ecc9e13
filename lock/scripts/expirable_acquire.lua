-- Take one permit of a PermitExpirableSemaphore, leased for ARGV[3] ms and
-- named by the attempt id ARGV[1] (Redisson's
-- RPermitExpirableSemaphore.tryAcquire(waitTime, leaseTime)): the permits
-- whose lease ended come back first. KEYS, ARGV: attempts.lua, leases.lua.
-- Returns 'OK' when taken, also when this attempt took it before; 'X' when
-- its caller gave it up (expirable_release.lua): a late run takes nothing;
-- else the ms until the first lease ends (-1: no lease), the longest a
-- waiter sleeps without a message.
local done = recorded()
if done then
    return done
end
local now = nowMs()
reclaim(now)
if tonumber(redis.call('get', KEYS[1]) or '0') < 1 then
    return nextEnd(now)
end
redis.call('decr', KEYS[1])
redis.call('zadd', KEYS[4], now + tonumber(ARGV[3]), ARGV[1])
return record('OK')
