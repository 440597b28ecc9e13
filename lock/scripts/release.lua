-- Release the last level of a Mutex's hold, handing the lock to the first
-- queued Client (see lock.lua) instead of waking every waiter to race for
-- it. The Client knows it is its last level, so the levels in Redis do not
-- matter; the hold token does: a release of an earlier hold of the same
-- Client, arriving late, finds another token and touches nothing.
-- KEYS[1] lock hash, KEYS[2] waiter queue, KEYS[3] the lock's release
-- latch (a list of the tokens of its last releases, 8 at most), or neither
-- while the lock's Cluster slot migrates (see lock.lua): the lock is then
-- given up, not handed on, an unlock message wakes the waiters, queued or
-- not, and no latch is kept
-- ARGV[1] owner field, ARGV[2] lease in ms of a grant, ARGV[4] channel,
-- ARGV[5] the publish command ('publish', or 'spublish' on a Redis Cluster),
-- ARGV[6] the hold's token, ARGV[7] how long the latch lasts in ms: as
-- long as the Redis client may re-send this request ('0': it never does,
-- no latch), ARGV[3] mode:
--   'release'  give the lock up;
--   'keep'     a cohort at its bound of local passes: give it up only when
--              another Client waits, else keep holding it;
--   'leave'    a waiter giving up: leave the queue, and hand on the lock
--              if it was granted meanwhile or the waiter's lost attempt
--              took it; the token goes into the latch either way, so
--              that attempt, if it has not run yet, takes nothing when
--              it does (lock.lua).
-- Returns nil when the hold is not in Redis, 0 when the owner keeps it,
-- 1 when released (to the next waiter, if any) — also when this release
-- already ran (the latch holds its token): a retried request returns the first
-- answer —, and instead of 1 the message it published when no subscriber
-- of this node heard it: while the slot migrates, the script may run on
-- the importing master and the waiters listen on the other, where the
-- Client publishes it again (issue 24).
-- latch records the token: capped, and kept as long as a re-send may come.
local function latch()
    if KEYS[3] and ARGV[7] ~= '0' then
        redis.call('lpush', KEYS[3], ARGV[6])
        redis.call('ltrim', KEYS[3], 0, 7)
        redis.call('pexpire', KEYS[3], ARGV[7])
    end
end
if ARGV[3] == 'leave' and KEYS[2] then
    redis.call('lrem', KEYS[2], 0, ARGV[1])
end
local hold = redis.call('hget', KEYS[1], 'hold')
if not (hold == ARGV[6] or (ARGV[3] == 'leave' and hold == '' and
        redis.call('hexists', KEYS[1], ARGV[1]) == 1)) then
    if KEYS[3] and redis.call('lpos', KEYS[3], ARGV[6]) then
        return 1
    end
    if ARGV[3] == 'leave' then
        latch()
    end
    return nil
end
local nextOwner = KEYS[2] and redis.call('lpop', KEYS[2])
-- The owner's own place can only be stale (a leave that failed): skip it.
if nextOwner == ARGV[1] then
    nextOwner = redis.call('lpop', KEYS[2])
end
if not nextOwner and ARGV[3] == 'keep' and KEYS[2] then
    return 0
end
latch()
-- heard is the reply: 1, or the message if no subscriber here heard it.
local function heard(message)
    if redis.call(ARGV[5], ARGV[4], message) == 0 then
        return message
    end
    return 1
end
if not nextOwner then
    redis.call('del', KEYS[1])
    if not KEYS[2] then
        -- Waiters were not queued meanwhile: wake them all, as Redisson does.
        return heard('u' .. ARGV[1])
    end
    return 1
end
-- Granted: the lock is the next Client's, for one grant lease unless it
-- confirms (its waiting attempt sets its own lease and hold token); a dead
-- Client's grant lapses after that lease, and its place in the queue was
-- its only one. With nobody queued no message is needed: a waiter that has
-- not queued yet tries again after subscribing (Redisson #1763), and one
-- whose place lapsed (a queue unrefreshed for longer than a lease) wakes by
-- its TTL timer. The next owner's field goes in before the owner's goes
-- out: a key that vanished mid-script cannot be written again while its
-- Cluster slot migrates ("non local key"), and the script would stop half
-- done.
redis.call('hset', KEYS[1], nextOwner, 1, 'hold', '')
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('pexpire', KEYS[1], ARGV[2])
return heard('g' .. nextOwner)
