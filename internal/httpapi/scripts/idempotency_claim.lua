-- Claims an idempotency key for a request, or says what holds it.
-- A claim is a pending marker that names the request and the Redis time it
-- started. It expires after the longest a request can run, unless the
-- request reached its stock write (idempotency_commit.lua made it last):
-- then a request whose outcome was never recorded is remembered as such
-- instead of running again.
-- KEYS[1] the idempotency key; ARGV[1] a random marker, ARGV[2] its TTL in ms
-- Returns {'claimed', marker value}, {'pending', ms since it started} or
-- {'answer', the stored answer}.
local v = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not v then
  local marker = 'pending:' .. ARGV[1] .. ':' .. now
  redis.call('SET', KEYS[1], marker, 'PX', ARGV[2])
  return {'claimed', marker}
end
if string.sub(v, 1, 8) == 'pending:' then
  return {'pending', tostring(now - tonumber(string.match(v, ':(%d+)$')))}
end
return {'answer', v}
