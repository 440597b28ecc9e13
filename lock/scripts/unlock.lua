-- Release one level of a reentrant lock's hold: Redisson's
-- RedissonLock.unlockInnerAsync, with the hold token instead of the owner
-- and the levels the Client counts instead of a decrement, so that running
-- it twice releases one level (see doc.go, "Unknown outcomes").
-- A Mutex gives up its inner levels here and its last one with release.lua;
-- a FencedMutex, whose hash also holds its fencing token, gives up every
-- level here.
-- KEYS[1] lock hash
-- ARGV[1] lease in ms to keep at least after a reentrant release (a longer
-- TTL is kept), ARGV[2] owner field, ARGV[3] unlock channel (an argument,
-- not a key: a key that never exists makes Redis Cluster answer TRYAGAIN
-- for as long as the lock's slot migrates, Redisson #612), ARGV[4] the
-- publish command: 'publish', or 'spublish' on a Redis Cluster, ARGV[5] the
-- hold's token, ARGV[6] the levels left once this one is released ('0':
-- the last), ARGV[7] the hold's release latch (release.lua), ARGV[8] its lifetime in ms
-- Returns nil when the hold is not in Redis, 0 when it is still held
-- (reentrant), 1 when the lock was released and waiters were told — also
-- when this release already ran (the latch holds its token).
if redis.call('hget', KEYS[1], 'hold') ~= ARGV[5] then
    -- The latch is best effort (pcall): while the lock's slot migrates, a
    -- key that is not on this node cannot be read nor written.
    if redis.pcall('get', ARGV[7]) == ARGV[5] then
        return 1
    end
    return nil
end
if ARGV[6] ~= '0' then
    redis.call('hset', KEYS[1], ARGV[2], ARGV[6])
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 0
end
redis.call('del', KEYS[1])
-- No latch ('0') when the client never sends a request twice.
if ARGV[8] ~= '0' then redis.pcall('set', ARGV[7], ARGV[5], 'px', ARGV[8]) end
-- The message names the releasing owner, so its own waiters can tell
-- their Client's unlocks from those of others.
redis.call(ARGV[4], ARGV[3], 'u' .. ARGV[2])
return 1
