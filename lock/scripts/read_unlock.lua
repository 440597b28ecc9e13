-- Release one level of a read lock's hold: Redisson's
-- RedissonReadLock.unlockInnerAsync (seed 001), with the hold's token as
-- its field and the levels the Client counts, so that running it twice
-- releases one level; a release that already ran answers 1 again.
-- KEYS[1] lock hash, KEYS[2] the lock's release latch (release.lua), or
-- the lock's key alone while its Cluster slot migrates: no latch then
-- ARGV[1] the hold's token (its field), ARGV[2] channel, ARGV[3] the
-- hold's read-timeout prefix, ARGV[4] the lock's read-timeout prefix
-- (a level's key is it, ':', the hold's token, ':', the level), ARGV[5] the
-- publish command ('publish', or 'spublish' on a Redis Cluster), ARGV[6]
-- the levels left once this one is released ('0': the last; '-1': an
-- attempt given up, unlock.lua), ARGV[7] the latch's lifetime in ms
-- Returns nil when the hold is not in Redis, 0 when the lock stays held, 1 when released.
local function latch()
    if KEYS[2] and ARGV[7] ~= '0' then
        redis.call('lpush', KEYS[2], ARGV[1])
        redis.call('ltrim', KEYS[2], 0, 7)
        redis.call('pexpire', KEYS[2], ARGV[7])
    end
end
local mode = redis.call('hget', KEYS[1], 'mode')
local levels = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if mode == false or not levels then
    if KEYS[2] and redis.call('lpos', KEYS[2], ARGV[1]) then
        return 1
    end
    if ARGV[6] == '-1' then
        latch()
    end
    return nil
end
local left = tonumber(ARGV[6])
if left > 0 then
    -- An inner level never cuts the lease: its time goes to the level
    -- below when it is longer, so the hold lasts as long as it did, in
    -- Redis and in the Client (whose deadline is its longest level's).
    local top, below = ARGV[3] .. ':' .. (left + 1), ARGV[3] .. ':' .. left
    local remain = redis.call('pttl', top)
    if remain > redis.call('pttl', below) then
        redis.call('set', below, 1, 'px', remain)
    end
    redis.call('del', top)
    redis.call('hset', KEYS[1], ARGV[1], left)
    return 0
end
redis.call('hdel', KEYS[1], ARGV[1])
for i = math.max(levels, 1), 1, -1 do
    redis.call('del', ARGV[3] .. ':' .. i)
end
latch()
if redis.call('hlen', KEYS[1]) > 1 then
    -- Other read levels remain: keep the lock as long as the longest of them.
    local maxRemain = -3
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
        local n = tonumber(redis.call('hget', KEYS[1], field))
        if type(n) == 'number' then
            for i = n, 1, -1 do
                local remain = redis.call('pttl', ARGV[4] .. ':' .. field .. ':' .. i)
                maxRemain = math.max(remain, maxRemain)
            end
        end
    end
    if maxRemain > 0 then
        redis.call('pexpire', KEYS[1], maxRemain)
        return 0
    end
    if mode == 'write' then
        return 0
    end
end
redis.call('del', KEYS[1])
redis.call(ARGV[5], ARGV[2], 'u')
return 1
