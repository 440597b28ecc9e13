-- Acquire a fair lock: Redisson's RedissonFairLock, with waiter deadlines
-- taken from Redis TIME rather than the client's clock, and a hold token
-- that names the acquisition (lock.lua).
-- KEYS[1] lock hash, KEYS[2] waiter queue (list), KEYS[3] waiter deadlines
-- (zset), KEYS[4] the lock's release latch (release.lua); or the lock's
-- key alone while its Cluster slot migrates (lock.lua): a waiter then is
-- not queued, a free lock goes to whoever asks first, a waiter wakes by
-- its timer (fair_unlock.lua), and a late first run is not told apart
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] waiter timeout ms, ARGV[4] '1' to queue,
-- ARGV[5] the hold's token, ARGV[6] the hold's levels once this one is added
-- ('1': a new hold)
-- Returns 'OK' when acquired (not nil: see lock.lua), else how long to sleep
-- at most (ms); for a reentrant level, a hold Redis no longer has.
if redis.call('hget', KEYS[1], 'hold') == ARGV[5] then
    -- A reentrant level, or this acquisition run again (lock.lua).
    redis.call('hset', KEYS[1], ARGV[2], ARGV[6])
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 'OK'
end
if ARGV[6] ~= '1' then
    return redis.call('pttl', KEYS[1])
end
if KEYS[4] and redis.call('lpos', KEYS[4], ARGV[5]) then
    -- This hold was released already: a first run arriving late (lock.lua).
    return -2
end
if not KEYS[2] then
    if redis.call('exists', KEYS[1]) == 1 then
        return redis.call('pttl', KEYS[1])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1, 'hold', ARGV[5])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 'OK'
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Waiters that stopped refreshing their deadline died or gave up: drop them.
while true do
    local first = redis.call('lindex', KEYS[2], 0)
    if not first then break end
    local deadline = tonumber(redis.call('zscore', KEYS[3], first))
    if deadline and deadline > now then break end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], first)
end
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and (not head or head == ARGV[2]) then
    if head then
        redis.call('lpop', KEYS[2])
        redis.call('zrem', KEYS[3], ARGV[2])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1, 'hold', ARGV[5])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 'OK'
end
-- Join the queue, or refresh this waiter's deadline in it.
if ARGV[4] == '1' and redis.call('zadd', KEYS[3], now + tonumber(ARGV[3]), ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
end
local ttl = redis.call('pttl', KEYS[1])
if ttl < 0 and head then
    -- Free, but promised to the head: wake by its deadline at the latest.
    ttl = tonumber(redis.call('zscore', KEYS[3], head)) - now
end
return ttl
