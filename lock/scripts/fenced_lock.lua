-- Acquire (or re-enter) a fenced reentrant lock. A new holder gets the next
-- fencing token from a counter beside the lock; a reentrant acquisition keeps
-- its holder's token (Redisson's RFencedLock bumps it on every level), and
-- so does this acquisition run again (a retried request): the hold token
-- names the acquisition (lock.lua).
-- KEYS[1] lock hash, KEYS[2] token counter (same hash tag)
-- ARGV[1] lease ms, ARGV[2] owner field, ARGV[3] the hold's token,
-- ARGV[4] the hold's levels once this one is added ('1': a new hold)
-- Returns {token} when acquired, else the lock's PTTL in ms (for a
-- reentrant level, a hold Redis no longer has).
if redis.call('hget', KEYS[1], 'hold') == ARGV[3] then
    redis.call('hset', KEYS[1], ARGV[2], ARGV[4])
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {tonumber(redis.call('hget', KEYS[1], 'token'))}
end
if ARGV[4] == '1' and redis.call('exists', KEYS[1]) == 0 then
    local token = redis.call('incr', KEYS[2])
    redis.call('hset', KEYS[1], ARGV[2], 1, 'token', token, 'hold', ARGV[3])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {token}
end
return redis.call('pttl', KEYS[1])
