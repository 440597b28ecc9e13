-- Release one level of a fair lock and wake only the next live waiter.
-- KEYS[1] lock hash, KEYS[2] waiter queue, KEYS[3] waiter deadlines
-- ARGV[1] lease ms to keep after a reentrant release, ARGV[2] owner, ARGV[3] channel prefix,
-- ARGV[4] the publish command ('publish', or 'spublish' on a Redis Cluster)
-- Returns nil when the owner does not hold the lock, 0 when it still holds it, 1 when released.
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 0
end
redis.call('del', KEYS[1])
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
