-- The owner of a pending marker says it is still running: the marker's
-- time becomes now, and it lasts at least a lease more (a marker made
-- durable before the stock write keeps its longer TTL). A request that
-- finds a marker whose time is a lease old knows its owner stopped.
-- KEYS[1] the idempotency key; ARGV[1] our marker's beginning
-- 'pending:<random>:', ARGV[2] the lease in ms.
-- Returns 1, or 0 when the marker is no longer ours.
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = math.max(redis.call('PTTL', KEYS[1]), tonumber(ARGV[2]))
redis.call('SET', KEYS[1], ARGV[1] .. now, 'PX', ttl)
return 1
