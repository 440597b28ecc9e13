-- Release one level of a fair lock's hold and wake only the next live
-- waiter. As unlock.lua: the hold token decides, the levels are the
-- Client's count, and a release that already ran answers 1 again.
-- KEYS[1] lock hash, KEYS[2] waiter queue, KEYS[3] waiter deadlines,
-- KEYS[4] the lock's release latch (release.lua), or the lock's key alone
-- while its Cluster slot migrates (fair_lock.lua): nobody is woken then,
-- the waiters not queued wake by their timers, and no latch is kept
-- ARGV[1] lease ms to keep at least after a reentrant release (a longer TTL
-- is kept: an inner unlock never cuts the lease), ARGV[2] owner,
-- ARGV[3] channel prefix, ARGV[4] the publish command ('publish', or
-- 'spublish' on a Redis Cluster), ARGV[5] the hold's token, ARGV[6] the
-- levels left once this one is released ('0': the last; '-1': an attempt
-- given up, unlock.lua), ARGV[7] the latch's lifetime in ms
-- Returns nil when the hold is not in Redis, 0 when it is still held, 1 when released.
local function latch()
    if KEYS[4] and ARGV[7] ~= '0' then
        redis.call('lpush', KEYS[4], ARGV[5])
        redis.call('ltrim', KEYS[4], 0, 7)
        redis.call('pexpire', KEYS[4], ARGV[7])
    end
end
if redis.call('hget', KEYS[1], 'hold') ~= ARGV[5] then
    if KEYS[4] and redis.call('lpos', KEYS[4], ARGV[5]) then
        return 1
    end
    if ARGV[6] == '-1' then
        latch()
    end
    return nil
end
if ARGV[6] ~= '0' and ARGV[6] ~= '-1' then
    redis.call('hset', KEYS[1], ARGV[2], ARGV[6])
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 0
end
redis.call('del', KEYS[1])
latch()
if not KEYS[2] then
    return 1
end
-- The owner's own place can only be stale (release.lua): its acquisition
-- ran with the lock's key alone while the slot migrated (fair_lock.lua)
-- and left it at the head, where it would keep every other waiter out
-- until its deadline.
redis.call('lrem', KEYS[2], 0, ARGV[2])
redis.call('zrem', KEYS[3], ARGV[2])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
    local first = redis.call('lindex', KEYS[2], 0)
    if not first then break end
    local deadline = tonumber(redis.call('zscore', KEYS[3], first))
    if deadline and deadline > now then
        redis.call(ARGV[4], ARGV[3] .. ':' .. first, 'u')
        break
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], first)
end
return 1
