-- Claims an idempotency key for a request, or says what holds it.
-- A claim is a pending marker that names the request and the Redis time it
-- started. It expires after the longest a request can run, unless the
-- request reached its stock write (idempotency_commit.lua made it last):
-- then a request whose outcome was never recorded is remembered as such
-- instead of running again.
-- A stage whose keyed sales name their order by the key (a request sent
-- again finishes the sale an earlier one started, never a second) takes
-- over a marker whose owner stopped renewing it for ARGV[3] ms (its
-- replica died, or it settled as outcome unknown): the sale runs again
-- under the same order id. ARGV[3] 0: never (every other stage).
-- KEYS[1] the idempotency key; ARGV[1] a random marker, ARGV[2] its TTL in
-- ms, ARGV[3] the takeover age in ms.
-- Returns {'claimed', marker value}, {'pending', ms since it started} or
-- {'answer', the stored answer}.
local v = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local takeover = tonumber(ARGV[3])
local pending = v and string.sub(v, 1, 8) == 'pending:'
local age = pending and now - tonumber(string.match(v, ':(%d+)$'))
if not v or (pending and takeover > 0 and age >= takeover) then
  local marker = 'pending:' .. ARGV[1] .. ':' .. now
  redis.call('SET', KEYS[1], marker, 'PX', ARGV[2])
  return {'claimed', marker}
end
if pending then
  return {'pending', tostring(age)}
end
return {'answer', v}
