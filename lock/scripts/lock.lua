-- Acquire (or re-enter) a reentrant lock: Redisson's RedissonLock.tryLockInnerAsync,
-- with a queue of waiting Clients that release.lua hands the lock to.
-- KEYS[1] lock hash, KEYS[2] waiter queue (list of owner fields; same hash tag)
-- ARGV[1] lease in ms, ARGV[2] owner field, ARGV[3] '1' when the caller
-- waits (listens on the channel), absent otherwise
-- Returns 'OK' when acquired, else the lock's PTTL in ms. Redisson returns nil
-- when acquired; go-redis makes a nil reply an error and runs it through its
-- retry checks, which cost ~1.5 µs of client CPU on every acquisition.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if ARGV[3] == '1' then
        redis.call('lrem', KEYS[2], 0, ARGV[2])
    end
    return 'OK'
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    -- A waiting Client holds no level here: its field is release.lua's grant,
    -- which it takes as is, with its own lease.
    if ARGV[3] == '1' then
        redis.call('pexpire', KEYS[1], ARGV[1])
        return 'OK'
    end
    -- One more reentrant level. Its lease may extend the lock but never
    -- shortens it: the levels already held were promised their own.
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 'OK'
end
local ttl = redis.call('pttl', KEYS[1])
if ARGV[3] == '1' then
    -- One place per Client: its handles wait behind one leader. The queue
    -- outlives the next attempt of every waiter (each sleeps at most the
    -- lock's TTL), so only a dead Client's place lapses.
    if not redis.call('lpos', KEYS[2], ARGV[2]) then
        redis.call('rpush', KEYS[2], ARGV[2])
    end
    redis.call('pexpire', KEYS[2], math.max(ttl, 0) + tonumber(ARGV[1]))
end
return ttl
