-- Acquire a read lock: Redisson's RedissonReadLock.tryLockInnerAsync (seed 001),
-- with Go's sync.RWMutex rule when ARGV[4] is '1': once a writer waits, new
-- readers wait behind it (a reader that already holds a level, and the
-- writer reading, still get in, so neither can deadlock).
-- KEYS[1] lock hash, KEYS[2] waiting writers (zset: write field -> deadline, ms of Redis TIME)
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] owner's write field, ARGV[4] '1': writers first,
-- ARGV[5] this owner's read-timeout prefix (its level keys share the hash tag)
-- Returns 'OK' when acquired (not nil: see lock.lua), else how long to sleep at most (ms).
local mode = redis.call('hget', KEYS[1], 'mode')
if ARGV[4] == '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 0
        and not (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    -- A writer that stopped refreshing its place died or gave up.
    redis.call('zremrangebyscore', KEYS[2], '-inf', now)
    local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
    if first[1] then
        -- Wake by the unlock, or when that writer's place would lapse.
        local ttl = redis.call('pttl', KEYS[1])
        local lapse = tonumber(first[2]) - now
        if ttl < 0 or lapse < ttl then
            ttl = lapse
        end
        return math.max(ttl, 1)
    end
end
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('set', ARGV[5] .. ':1', 1)
    redis.call('pexpire', ARGV[5] .. ':1', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 'OK'
end
-- Readers share; the writer may also read (write → read by the same owner).
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    local key = ARGV[5] .. ':' .. ind
    redis.call('set', key, 1)
    redis.call('pexpire', key, ARGV[1])
    local remain = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(remain, tonumber(ARGV[1])))
    return 'OK'
end
return redis.call('pttl', KEYS[1])
