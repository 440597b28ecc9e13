-- Acquire a write lock: Redisson's RedissonWriteLock.tryLockInnerAsync (seed 001).
-- A waiting writer keeps a place among the waiting writers, which makes new
-- readers wait behind it (read_lock.lua); it leaves when it acquires. The
-- field "<write field>:hold" holds the hold's token (lock.lua).
-- KEYS[1] lock hash, KEYS[2] waiting writers (zset: write field -> deadline),
-- KEYS[3] the lock's release latch (release.lua), or neither while the
-- lock's Cluster slot migrates (lock.lua): a waiting writer then keeps no
-- place, new readers may go first, and a late first run is not told apart
-- ARGV[1] lease ms, ARGV[2] owner's write field, ARGV[3] '1' when the caller
-- waits, ARGV[4] how long its place lasts unless refreshed (ms), ARGV[5] the
-- hold's token, ARGV[6] the hold's levels once this one is added ('1': a
-- new hold)
-- Returns 'OK' when acquired (not nil: see lock.lua), else the lock's PTTL
-- in ms; for a reentrant level, a hold Redis no longer has.
local holdField = ARGV[2] .. ':hold'
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'write' and redis.call('hget', KEYS[1], holdField) == ARGV[5] then
    -- A reentrant level, or this acquisition run again: never shortened.
    redis.call('hset', KEYS[1], ARGV[2], ARGV[6])
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 'OK'
end
if ARGV[6] ~= '1' then
    return redis.call('pttl', KEYS[1])
end
if KEYS[3] and redis.call('lpos', KEYS[3], ARGV[5]) then
    -- This hold was released already: a first run arriving late (lock.lua).
    return -2
end
if mode == false then
    if KEYS[2] then
        redis.call('zrem', KEYS[2], ARGV[2])
    end
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1, holdField, ARGV[5])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 'OK'
end
if ARGV[3] == '1' and KEYS[2] then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('zadd', KEYS[2], now + tonumber(ARGV[4]), ARGV[2])
    -- Every place lapses by then unless refreshed: a dead writer's too.
    redis.call('pexpire', KEYS[2], ARGV[4])
end
return redis.call('pttl', KEYS[1])
