-- Acquire a read lock: Redisson's RedissonReadLock.tryLockInnerAsync (seed 001).
-- KEYS[1] lock hash, KEYS[2] this owner's read-timeout prefix
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] owner's write field
-- Returns 'OK' when acquired (not nil: see lock.lua), else the lock's PTTL in ms.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':1', 1)
    redis.call('pexpire', KEYS[2] .. ':1', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 'OK'
end
-- Readers share; the writer may also read (write → read by the same owner).
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local key = KEYS[2] .. ':' .. ind
    redis.call('set', key, 1)
    redis.call('pexpire', key, ARGV[1])
    local remain = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(remain, tonumber(ARGV[1])))
    return 'OK'
end
return redis.call('pttl', KEYS[1])
