-- A waiting writer that gives up leaves the waiting writers; when it was the
-- last, the readers it held back are woken.
-- KEYS[1] waiting writers; ARGV[1] owner's write field, ARGV[2] channel,
-- ARGV[3] the publish command ('publish', or 'spublish' on a Redis Cluster)
if redis.call('zrem', KEYS[1], ARGV[1]) == 1 and redis.call('exists', KEYS[1]) == 0 then
    redis.call(ARGV[3], ARGV[2], 'u')
end
return 1
