-- Take every permit of the semaphore KEYS[1] (Redisson's
-- RSemaphore.drainPermits). ARGV[1..2]: attempts.lua. Returns how many
-- were taken, as a string; run again, the same number, and nothing more
-- is taken.
local done = recorded()
if done then
    return done
end
local have = redis.call('get', KEYS[1])
if not have then
    return record('0')
end
redis.call('set', KEYS[1], 0)
return record(have)
