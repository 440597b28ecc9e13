-- Acquire (or re-enter) a fenced reentrant lock. A new holder gets the next
-- fencing token from a counter beside the lock, or the server's clock in
-- microseconds when that is larger; a reentrant acquisition keeps
-- its holder's token (Redisson's RFencedLock bumps it on every level), and
-- so does this acquisition run again (a retried request): the hold token
-- names the acquisition (lock.lua).
-- KEYS[1] lock hash, KEYS[2] token counter, KEYS[3] the lock's release
-- latch (same hash tag; release.lua), or neither while the lock's Cluster
-- slot migrates (lock.lua): a free lock is then created on the importing
-- master (the slot's master may not create a key), which takes the counter
-- only if it has moved there already: incrementing one that is not there
-- would start the tokens over; and a late first run is not told from a
-- new one.
-- ARGV[1] lease ms, ARGV[2] owner field, ARGV[3] the hold's token,
-- ARGV[4] the hold's levels once this one is added ('1': a new hold),
-- ARGV[5] the token counter's name
-- Returns {token} when acquired, else the lock's PTTL in ms (-2 for a
-- reentrant level, a hold Redis no longer has, and for a new hold whose
-- token the latch has: a first run arriving after its hold was released,
-- lock.lua), or the error COUNTERMOVING when the lock is free and the
-- counter not on this node.
if redis.call('hget', KEYS[1], 'hold') == ARGV[3] then
    redis.call('hset', KEYS[1], ARGV[2], ARGV[4])
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {tonumber(redis.call('hget', KEYS[1], 'token'))}
end
if ARGV[4] == '1' and redis.call('exists', KEYS[1]) == 0 then
    if KEYS[3] and redis.call('lpos', KEYS[3], ARGV[3]) then
        return -2
    end
    -- pcall: a key not on this node of a migrating slot cannot be read.
    if not KEYS[2] and redis.pcall('exists', ARGV[5]) ~= 1 then
        return redis.error_reply('COUNTERMOVING the fencing counter has not moved to this node yet')
    end
    -- The token never goes back, even when the counter did (a restart
    -- without persistence, a failover that lost its last increments): it
    -- is at least the server's clock in microseconds (fenced.go).
    local now = redis.call('time')
    local token = tonumber(redis.call('get', ARGV[5]) or 0) + 1
    local epoch = tonumber(now[1]) * 1000000 + tonumber(now[2])
    if token < epoch then token = epoch end
    local text = string.format('%.0f', token) -- not a float's shortest form
    redis.call('set', ARGV[5], text)
    redis.call('hset', KEYS[1], ARGV[2], 1, 'token', text, 'hold', ARGV[3])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {token}
end
return redis.call('pttl', KEYS[1])
