-- Release the last level a Mutex's Client holds, handing the lock to the
-- first queued Client (see lock.lua) instead of waking every waiter to race
-- for it. The Client knows it is its last level, so it need not read the
-- count first, and a Mutex's hash holds no field but its owner's: deleting
-- that field deletes the key.
-- KEYS[1] lock hash, KEYS[2] waiter queue
-- ARGV[1] owner field, ARGV[2] lease in ms of a grant, ARGV[4] channel,
-- ARGV[5] the publish command ('publish', or 'spublish' on a Redis Cluster),
-- ARGV[3] mode:
--   'release'  give the lock up;
--   'keep'     a cohort at its bound of local passes: give it up only when
--              another Client waits, else keep holding it;
--   'leave'    a waiter giving up: leave the queue, and hand on the lock
--              if it was granted meanwhile.
-- Returns nil when the owner does not hold the lock, 0 when it keeps it,
-- 1 when released (to the next waiter, if any).
if ARGV[3] == 'leave' then
    redis.call('lrem', KEYS[2], 0, ARGV[1])
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return nil
end
local nextOwner = redis.call('lpop', KEYS[2])
-- The owner's own place can only be stale (a leave that failed): skip it.
if nextOwner == ARGV[1] then
    nextOwner = redis.call('lpop', KEYS[2])
end
if not nextOwner then
    if ARGV[3] == 'keep' then
        return 0
    end
    redis.call('del', KEYS[1])
    return 1
end
-- Granted: the lock is the next Client's, for one grant lease unless it
-- confirms (its waiting attempt sets its own lease); a dead Client's grant
-- lapses after that lease, and its place in the queue was its only one.
-- With nobody queued no message is needed: a waiter that has not queued yet
-- tries again after subscribing (Redisson #1763), and one whose place lapsed
-- (a queue unrefreshed for longer than a lease) wakes by its TTL timer.
-- The next owner's field goes in before the owner's goes out: a key that
-- vanished mid-script cannot be written again while its Cluster slot
-- migrates ("non local key"), and the script would stop half done.
redis.call('hset', KEYS[1], nextOwner, 1)
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[2])
redis.call(ARGV[5], ARGV[4], 'g' .. nextOwner)
return 1
