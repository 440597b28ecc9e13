-- Acquire (or re-enter) a reentrant lock: Redisson's RedissonLock.tryLockInnerAsync,
-- with a queue of waiting Clients that release.lua hands the lock to, and a
-- hold token that names the acquisition (see doc.go, "Unknown outcomes").
-- KEYS[1] lock hash, KEYS[2] waiter queue (list of owner fields; same hash
-- tag), KEYS[3] the lock's release latch (release.lua), or neither: while the lock's Cluster slot migrates, Redis refuses the two
-- keys (TRYAGAIN) until the whole slot moved when one of them is on
-- neither master or they are on different ones, and the Client runs this
-- with the lock's key alone; a waiter then is not queued, and wakes on an
-- unlock message or its timer (issue 24), and a late first run is not
-- told from a new one.
-- ARGV[1] lease in ms, ARGV[2] owner field, ARGV[3] '1' when the caller
-- waits (listens on the channel), '0' otherwise, ARGV[4] the hold's token,
-- ARGV[5] the hold's levels once this one is added ('1': a new hold)
-- The hash holds the owner's field (its levels, as the Client counts them)
-- and 'hold' (the token of the hold, '' while granted and not yet taken).
-- Returns 'OK' when acquired, else the lock's PTTL in ms (for a reentrant
-- level, a hold Redis no longer has: the caller lost it). Redisson returns
-- nil when acquired; go-redis makes a nil reply an error and runs it through
-- its retry checks, which cost ~1.5 µs of client CPU on every acquisition.
-- A new hold whose token the latch has was released already: this is its
-- first run arriving late, after its caller gave up on it and released it
-- (or left, release.lua). It must take nothing: nobody would release it.
local function released()
    return KEYS[3] and redis.call('lpos', KEYS[3], ARGV[4])
end
if redis.call('exists', KEYS[1]) == 0 then
    if ARGV[5] ~= '1' or released() then
        -- A reentrant level of a hold that is gone (expired, wiped, failed
        -- over): never re-create it under a holder that believes it held on.
        return -2
    end
    redis.call('hset', KEYS[1], ARGV[2], 1, 'hold', ARGV[4])
    redis.call('pexpire', KEYS[1], ARGV[1])
    if ARGV[3] == '1' and KEYS[2] then
        redis.call('lrem', KEYS[2], 0, ARGV[2])
    end
    return 'OK'
end
local hold = redis.call('hget', KEYS[1], 'hold')
if hold == ARGV[4] then
    -- A reentrant level of this hold, or this acquisition run again (a
    -- retried request): set the levels the Client counts, so a replay
    -- changes nothing. A level may extend the lock but never shortens it:
    -- the levels already held were promised their own lease.
    redis.call('hset', KEYS[1], ARGV[2], ARGV[5])
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 'OK'
end
if ARGV[5] ~= '1' then
    -- Another hold has the lock: this one is gone.
    return redis.call('pttl', KEYS[1])
end
if hold == '' and ARGV[3] == '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 and not released() then
    -- release.lua's grant to this Client: its waiting attempt takes it as
    -- its hold, with its own lease.
    redis.call('hset', KEYS[1], 'hold', ARGV[4])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 'OK'
end
local ttl = redis.call('pttl', KEYS[1])
if ARGV[3] == '1' and KEYS[2] then
    -- One place per Client: its handles wait behind one leader. The queue
    -- outlives the next attempt of every waiter (each sleeps at most the
    -- lock's TTL), so only a dead Client's place lapses.
    if not redis.call('lpos', KEYS[2], ARGV[2]) then
        redis.call('rpush', KEYS[2], ARGV[2])
    end
    redis.call('pexpire', KEYS[2], math.max(ttl, 0) + tonumber(ARGV[1]))
end
return ttl
