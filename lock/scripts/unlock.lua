-- Release one level of a reentrant lock: Redisson's RedissonLock.unlockInnerAsync.
-- A Mutex gives up its inner levels here and its last one with release.lua;
-- a FencedMutex, whose hash also holds its token, gives up every level here.
-- KEYS[1] lock hash
-- ARGV[1] lease in ms to keep at least after a reentrant release (a longer
-- TTL is kept), ARGV[2] owner field, ARGV[3] unlock channel (an argument,
-- not a key: a key that never exists makes Redis Cluster answer TRYAGAIN
-- for as long as the lock's slot migrates, Redisson #612), ARGV[4] the
-- publish command: 'publish', or 'spublish' on a Redis Cluster
-- Returns nil when the owner does not hold the lock, 0 when it still holds
-- it (reentrant), 1 when the lock was released and waiters were told.
local levels = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
if not levels then
    return nil
end
if levels > 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], -1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 0
end
redis.call('del', KEYS[1])
-- The message names the releasing owner, so its own waiters can tell
-- their Client's unlocks from those of others.
redis.call(ARGV[4], ARGV[3], 'u' .. ARGV[2])
return 1
