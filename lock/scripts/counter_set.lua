-- Set the counter KEYS[1] to ARGV[3] unless it exists, and wake its
-- waiters: a semaphore's TrySetPermits, a count-down latch's TrySetCount
-- (Redisson's trySetPermits, trySetCount). A semaphore that exists with 0
-- permits left exists: a new stock is not set. ARGV[1..2]: attempts.lua;
-- ARGV[4..5]: semaphore_add.lua. Returns '1' when set, '0' when it existed;
-- run again, what the first run returned.
local done = recorded()
if done then
    return done
end
if redis.call('setnx', KEYS[1], ARGV[3]) == 0 then
    return record('0')
end
redis.call(ARGV[5], ARGV[4], 'u' .. ARGV[3])
return record('1')
