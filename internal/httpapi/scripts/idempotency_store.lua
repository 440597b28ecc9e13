-- Replaces our pending marker with the answer, unless the marker is no
-- longer ours (it expired and another request took the key over).
-- KEYS[1] the idempotency key; ARGV[1] our pending marker's beginning
-- 'pending:<random>:', ARGV[2] the answer, ARGV[3] its TTL in ms.
-- Returns 1 when stored.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
