-- The attempt record, put before each script of the semaphores and the
-- count-down latch (scripts.go, loadCounterScript). Every call that changes
-- a counter has an attempt id of its own; its reply is kept under that id
-- for as long as go-redis may send the request again, so that a run twice
-- answers what the first run did and changes nothing, and an attempt its
-- caller gave up can be marked so that a late first run takes nothing.
-- KEYS[2] the replies (hash: attempt id -> reply), KEYS[3] when each ends
-- (zset: attempt id -> ms of Redis TIME), ARGV[1] the attempt id, ARGV[2]
-- how long a reply is kept, in ms, then, space-separated, the ids of
-- earlier attempts of the same Client whose callers have their reply and
-- whose requests nobody sends again (counter.go, acks): their replies go
-- now rather than at their window's end.
-- windowMs is how long a reply is kept.
local function windowMs()
    return tonumber(string.match(ARGV[2], '^%d+'))
end
local function nowMs()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- recorded drops the acknowledged replies and a few ended ones (at most
-- 16, more than a call adds, so the record follows the calls of the last
-- window) and returns this attempt's reply, if it has one.
local function recorded()
    local ended = redis.call('zrangebyscore', KEYS[3], '-inf', nowMs(), 'limit', 0, 16)
    for id in string.gmatch(ARGV[2], ' (%S+)') do
        ended[#ended + 1] = id
    end
    if #ended > 0 then
        redis.call('zrem', KEYS[3], unpack(ended))
        redis.call('hdel', KEYS[2], unpack(ended))
    end
    return redis.call('hget', KEYS[2], ARGV[1])
end
-- record keeps reply as this attempt's and returns it.
local function record(reply)
    local window = windowMs()
    redis.call('hset', KEYS[2], ARGV[1], reply)
    redis.call('zadd', KEYS[3], nowMs() + window, ARGV[1])
    redis.call('pexpire', KEYS[2], window)
    redis.call('pexpire', KEYS[3], window)
    return reply
end
