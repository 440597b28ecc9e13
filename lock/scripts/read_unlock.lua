-- Release one level of a read lock: Redisson's RedissonReadLock.unlockInnerAsync (seed 001).
-- KEYS[1] lock hash
-- ARGV[1] owner, ARGV[2] channel, ARGV[3] this owner's read-timeout prefix, ARGV[4] key prefix,
-- ARGV[5] the publish command ('publish', or 'spublish' on a Redis Cluster)
-- Returns nil when the owner holds no read level, 0 when the lock stays held, 1 when released.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return nil
end
local counter = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if counter == 0 then
    redis.call('hdel', KEYS[1], ARGV[1])
end
redis.call('del', ARGV[3] .. ':' .. (counter + 1))
if redis.call('hlen', KEYS[1]) > 1 then
    -- Other read levels remain: keep the lock as long as the longest of them.
    local maxRemain = -3
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
        local n = tonumber(redis.call('hget', KEYS[1], field))
        if type(n) == 'number' then
            for i = n, 1, -1 do
                local remain = redis.call('pttl', ARGV[4] .. ':' .. field .. ':rwlock_timeout:' .. i)
                maxRemain = math.max(remain, maxRemain)
            end
        end
    end
    if maxRemain > 0 then
        redis.call('pexpire', KEYS[1], maxRemain)
        return 0
    end
    if mode == 'write' then
        return 0
    end
end
redis.call('del', KEYS[1])
redis.call(ARGV[5], ARGV[2], 'u')
return 1
