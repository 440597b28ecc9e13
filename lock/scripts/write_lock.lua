-- Acquire a write lock: Redisson's RedissonWriteLock.tryLockInnerAsync (seed 001).
-- A waiting writer keeps a place among the waiting writers, which makes new
-- readers wait behind it (read_lock.lua); it leaves when it acquires.
-- KEYS[1] lock hash, KEYS[2] waiting writers (zset: write field -> deadline)
-- ARGV[1] lease ms, ARGV[2] owner's write field, ARGV[3] '1' when the caller
-- waits, ARGV[4] how long its place lasts unless refreshed (ms)
-- Returns 'OK' when acquired (not nil: see lock.lua), else the lock's PTTL in ms.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('zrem', KEYS[2], ARGV[2])
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
if ARGV[3] == '1' then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('zadd', KEYS[2], now + tonumber(ARGV[4]), ARGV[2])
    -- Every place lapses by then unless refreshed: a dead writer's too.
    redis.call('pexpire', KEYS[2], ARGV[4])
end
return redis.call('pttl', KEYS[1])
