-- Acquire a write lock: Redisson's RedissonWriteLock.tryLockInnerAsync (seed 001).
-- KEYS[1] lock hash; ARGV[1] lease ms, ARGV[2] owner's write field
-- Returns 'OK' when acquired (not nil: see lock.lua), else the lock's PTTL in ms.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 'OK'
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local current = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], current + tonumber(ARGV[1]))
    return 'OK'
end
return redis.call('pttl', KEYS[1])
