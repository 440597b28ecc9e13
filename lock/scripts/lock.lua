-- Acquire (or re-enter) a reentrant lock: Redisson's RedissonLock.tryLockInnerAsync.
-- KEYS[1] lock hash, KEYS[2] unlock channel (same hash tag)
-- ARGV[1] lease in ms, ARGV[2] owner field, ARGV[3] '1' when the caller will
-- wait (absent otherwise)
-- Returns 'OK' when acquired, else the lock's PTTL in ms. Redisson returns nil
-- when acquired; go-redis makes a nil reply an error and runs it through its
-- retry checks, which cost ~1.5 µs of client CPU on every acquisition.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 'OK'
end
-- A waiter announces itself so a holder passing the lock inside its own
-- process (lock cohorting) releases it globally at its next unlock.
if ARGV[3] == '1' then
    redis.call('publish', KEYS[2], 'w' .. ARGV[2])
end
return redis.call('pttl', KEYS[1])
