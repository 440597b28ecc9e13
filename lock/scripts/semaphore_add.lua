-- Add ARGV[3] permits (negative: remove) to the semaphore KEYS[1] and wake
-- its waiters: Release and AddPermits (Redisson's RSemaphore.release,
-- addPermits). ARGV[1..2]: attempts.lua; ARGV[4] the channel, ARGV[5] the
-- publish command ('publish', or 'spublish' on a Redis Cluster). The
-- message is 'u' and the permits now free: each Client wakes as many of
-- its waiters as they serve (waitqueue.go).
-- Returns 'OK', also when this attempt ran before (nothing is added again).
local done = recorded()
if done then
    return done
end
local free = redis.call('incrby', KEYS[1], ARGV[3])
redis.call(ARGV[5], ARGV[4], 'u' .. free)
return record('OK')
