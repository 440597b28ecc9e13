-- Acquire (or re-enter) a fenced reentrant lock. A new holder gets the next
-- fencing token from a counter beside the lock; a reentrant acquisition keeps
-- its holder's token (Redisson's RFencedLock bumps it on every level).
-- KEYS[1] lock hash, KEYS[2] token counter (same hash tag)
-- ARGV[1] lease ms, ARGV[2] owner field
-- Returns {token} when acquired, else the lock's PTTL in ms.
if redis.call('exists', KEYS[1]) == 0 then
    local token = redis.call('incr', KEYS[2])
    redis.call('hset', KEYS[1], ARGV[2], 1, 'token', token)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {token}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    -- A reentrant level extends the lock but never shortens it (lock.lua).
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {tonumber(redis.call('hget', KEYS[1], 'token'))}
end
return redis.call('pttl', KEYS[1])
