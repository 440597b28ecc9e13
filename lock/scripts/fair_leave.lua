-- A waiter that gives up leaves the fair lock's queue; if it was next and the
-- lock is free, the waiter behind it is woken.
-- KEYS[1] lock hash, KEYS[2] waiter queue, KEYS[3] waiter deadlines, or
-- the lock's key alone while its Cluster slot migrates (fair_lock.lua): the
-- waiter was not queued then, or its place lapses with its deadline
-- ARGV[1] owner, ARGV[2] channel prefix, ARGV[3] the publish command
-- ('publish', or 'spublish' on a Redis Cluster)
if not KEYS[2] then
    return 1
end
local wasHead = redis.call('lindex', KEYS[2], 0) == ARGV[1]
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('lrem', KEYS[2], 0, ARGV[1])
if wasHead and redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head then
        redis.call(ARGV[3], ARGV[2] .. ':' .. head, 'u')
    end
end
return 1
