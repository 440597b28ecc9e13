-- Release one level of a write lock: Redisson's RedissonWriteLock.unlockInnerAsync (seed 001).
-- KEYS[1] lock hash; ARGV[1] lease ms, ARGV[2] owner's write field, ARGV[3] channel,
-- ARGV[4] the publish command ('publish', or 'spublish' on a Redis Cluster)
-- Returns nil when the owner does not hold the write lock, 0 when it still
-- does (reentrant), 1 when released (to its own read levels, if any).
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
    -- Extend to the lease at least, never shorten (lock.lua).
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 0
end
redis.call('hdel', KEYS[1], ARGV[2])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[4], ARGV[3], 'u')
else
    -- The writer still holds read levels: the lock becomes a read lock.
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call(ARGV[4], ARGV[3], 'u')
end
return 1
