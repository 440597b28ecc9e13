-- Release one level of a reentrant lock's hold: Redisson's
-- RedissonLock.unlockInnerAsync, with the hold token instead of the owner
-- and the levels the Client counts instead of a decrement, so that running
-- it twice releases one level (see doc.go, "Unknown outcomes").
-- A Mutex gives up its inner levels here and its last one with release.lua;
-- a FencedMutex, whose hash also holds its fencing token, gives up every
-- level here.
-- KEYS[1] lock hash, KEYS[2] the lock's release latch (release.lua), or
-- none while the lock's Cluster slot migrates (lock.lua): the release then
-- keeps no latch, and a re-sent one, finding none, answers nil
-- ARGV[1] lease in ms to keep at least after a reentrant release (a longer
-- TTL is kept), ARGV[2] owner field, ARGV[3] unlock channel (an argument,
-- not a key: a key that never exists makes Redis Cluster answer TRYAGAIN
-- for as long as the lock's slot migrates, Redisson #612), ARGV[4] the
-- publish command: 'publish', or 'spublish' on a Redis Cluster, ARGV[5] the
-- hold's token, ARGV[6] the levels left once this one is released ('0':
-- the last; '-1': an attempt given up, whose token goes into the latch
-- even when it took nothing, release.lua's 'leave'), ARGV[7] how long the
-- latch lasts in ms ('0': no latch)
-- Returns nil when the hold is not in Redis, 0 when it is still held
-- (reentrant), 1 when the lock was released and waiters were told — also
-- when this release already ran (the latch holds its token).
local function latch()
    if KEYS[2] and ARGV[7] ~= '0' then
        redis.call('lpush', KEYS[2], ARGV[5])
        redis.call('ltrim', KEYS[2], 0, 7)
        redis.call('pexpire', KEYS[2], ARGV[7])
    end
end
if redis.call('hget', KEYS[1], 'hold') ~= ARGV[5] then
    if KEYS[2] and redis.call('lpos', KEYS[2], ARGV[5]) then
        return 1
    end
    if ARGV[6] == '-1' then
        latch()
    end
    return nil
end
if ARGV[6] ~= '0' and ARGV[6] ~= '-1' then
    redis.call('hset', KEYS[1], ARGV[2], ARGV[6])
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 0
end
redis.call('del', KEYS[1])
latch()
-- The message names the releasing owner, so its own waiters can tell
-- their Client's unlocks from those of others.
redis.call(ARGV[4], ARGV[3], 'u' .. ARGV[2])
return 1
