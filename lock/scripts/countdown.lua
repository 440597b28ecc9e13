-- Count the latch KEYS[1] down by one; at zero delete it and wake its
-- waiters (Redisson's RCountDownLatch.countDown). ARGV[1..2]: attempts.lua;
-- ARGV[4..5]: semaphore_add.lua (ARGV[3] is unused). Returns 'OK', also
-- when this attempt ran before (it counts once).
local done = recorded()
if done then
    return done
end
local left = redis.call('decr', KEYS[1])
if left <= 0 then
    redis.call('del', KEYS[1])
    redis.call(ARGV[5], ARGV[4], 'u')
end
return record('OK')
