-- The leases of a PermitExpirableSemaphore's permits, put after
-- attempts.lua before each of its scripts (scripts.go). KEYS[1] the
-- permits available, KEYS[4] the permits taken (zset: permit id -> end of
-- its lease, ms of Redis TIME); ARGV[4..5]: semaphore_add.lua.
-- wake tells the waiters how many permits are free (semaphore_add.lua).
local function wake(free)
    redis.call(ARGV[5], ARGV[4], 'u' .. free)
end
-- reclaim gives the permits whose lease ended back, wakes the waiters if
-- there were any, and returns how many came back.
local function reclaim(now)
    local ended = redis.call('zremrangebyscore', KEYS[4], '-inf', now)
    if ended > 0 then
        wake(redis.call('incrby', KEYS[1], ended))
    end
    return ended
end
-- nextEnd is the ms until the first lease ends, -1 when none is taken.
local function nextEnd(now)
    local first = redis.call('zrange', KEYS[4], 0, 0, 'withscores')
    if #first == 0 then
        return -1
    end
    return math.max(tonumber(first[2]) - now, 0)
end
-- permitId is the id of the i-th of the n permits an acquisition with the
-- attempt id took: the attempt id itself when it took one.
local function permitId(attempt, i, n)
    if n == 1 then
        return attempt
    end
    return attempt .. ':' .. i
end
