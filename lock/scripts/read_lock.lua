-- Acquire a read lock: Redisson's RedissonReadLock.tryLockInnerAsync (seed 001),
-- with Go's sync.RWMutex rule when ARGV[4] is '1': once a writer waits, new
-- readers wait behind it (a hold that already has a level, and the writer
-- reading, still get in, so neither can deadlock).
-- A reader's field is its hold's token, so each hold has fields and level
-- keys of its own, and a late request of an earlier hold finds nothing of
-- a later one (see doc.go, "Unknown outcomes").
-- KEYS[1] lock hash, KEYS[2] waiting writers (zset: write field -> deadline, ms of Redis TIME),
-- KEYS[3] the lock's release latch (release.lua), or neither while the
-- lock's Cluster slot migrates (lock.lua): readers then do not wait behind
-- waiting writers, and a late first run is not told apart
-- ARGV[1] lease ms, ARGV[2] the hold's token (its field), ARGV[3] owner's write field,
-- ARGV[4] '1': writers first, ARGV[5] the hold's read-timeout prefix (its
-- level keys share the hash tag), ARGV[6] the hold's levels once this one
-- is added ('1': a new hold)
-- Returns 'OK' when acquired (not nil: see lock.lua), else how long to sleep
-- at most (ms); for a reentrant level, a hold Redis no longer has.
local lease = tonumber(ARGV[1])
local level = ARGV[5] .. ':' .. ARGV[6]
-- While the slot migrates, only the importing master may create its keys:
-- the slot's master, holding the lock, refuses to touch a level key it
-- lacks. Refuse first, as Redis refuses keys split between the masters,
-- rather than stop half done (the reader's field written, its level key
-- not), which broke every later release of the lock.
if type(redis.pcall('pttl', level)) == 'table' then
    return redis.error_reply('TRYAGAIN the read level cannot be created on this node while the slot migrates')
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    -- A reentrant level of this hold, or this acquisition run again: set
    -- the level the Client counts; nothing is ever shortened.
    redis.call('hset', KEYS[1], ARGV[2], ARGV[6])
    if redis.call('pttl', level) < lease then
        redis.call('set', level, 1, 'px', lease)
    end
    if redis.call('pttl', KEYS[1]) < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    return 'OK'
end
if ARGV[6] ~= '1' then
    return redis.call('pttl', KEYS[1])
end
if KEYS[3] and redis.call('lpos', KEYS[3], ARGV[2]) then
    -- This hold was released already: a first run arriving late (lock.lua).
    return -2
end
local mode = redis.call('hget', KEYS[1], 'mode')
if ARGV[4] == '1' and KEYS[2] and not (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local t = redis.call('time')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    -- A writer that stopped refreshing its place died or gave up.
    redis.call('zremrangebyscore', KEYS[2], '-inf', now)
    local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
    if first[1] then
        -- Wake by the unlock, or when that writer's place would lapse.
        local ttl = redis.call('pttl', KEYS[1])
        local lapse = tonumber(first[2]) - now
        if ttl < 0 or lapse < ttl then
            ttl = lapse
        end
        return math.max(ttl, 1)
    end
end
-- Readers share; the writer may also read (write → read by the same owner).
if mode == false or mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    if mode == false then
        redis.call('hset', KEYS[1], 'mode', 'read')
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('set', level, 1, 'px', lease)
    if redis.call('pttl', KEYS[1]) < lease then
        redis.call('pexpire', KEYS[1], lease)
    end
    return 'OK'
end
return redis.call('pttl', KEYS[1])
