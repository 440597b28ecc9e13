-- Release one level of a write lock's hold: Redisson's
-- RedissonWriteLock.unlockInnerAsync (seed 001), with the hold token and
-- the levels the Client counts (unlock.lua).
-- KEYS[1] lock hash, KEYS[2] the lock's release latch (release.lua), or
-- the lock's key alone while its Cluster slot migrates: no latch then
-- ARGV[1] lease ms, ARGV[2] owner's write field, ARGV[3] channel,
-- ARGV[4] the publish command ('publish', or 'spublish' on a Redis Cluster),
-- ARGV[5] the hold's token, ARGV[6] the levels left once this one is
-- released ('0': the last; '-1': an attempt given up, unlock.lua),
-- ARGV[7] the latch's lifetime in ms, ARGV[8] the waiting writers (same
-- hash tag)
-- Returns nil when the hold is not in Redis, 0 when the owner still holds
-- the write lock (reentrant), 1 when released (to its own read levels, if
-- any) — also when this release already ran (the latch holds its token).
local function latch()
    if KEYS[2] and ARGV[7] ~= '0' then
        redis.call('lpush', KEYS[2], ARGV[5])
        redis.call('ltrim', KEYS[2], 0, 7)
        redis.call('pexpire', KEYS[2], ARGV[7])
    end
end
local holdField = ARGV[2] .. ':hold'
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hget', KEYS[1], holdField) ~= ARGV[5] then
    if KEYS[2] and redis.call('lpos', KEYS[2], ARGV[5]) then
        return 1
    end
    if ARGV[6] == '-1' then
        latch()
    end
    return nil
end
if ARGV[6] ~= '0' and ARGV[6] ~= '-1' then
    -- Extend to the lease at least, never shorten (lock.lua).
    redis.call('hset', KEYS[1], ARGV[2], ARGV[6])
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 0
end
redis.call('hdel', KEYS[1], ARGV[2], holdField)
latch()
-- The writer's own place among the waiting writers can only be stale: its
-- acquisition ran with the lock's key alone while the slot migrated
-- (write_lock.lua) and could not leave it. Left there, new readers would
-- wait behind it until it lapsed. Best effort (pcall), as the latch.
redis.pcall('zrem', ARGV[8], ARGV[2])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
else
    -- The writer still holds read levels: the lock becomes a read lock.
    redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call(ARGV[4], ARGV[3], 'u')
return 1
