-- Deletes our pending marker so a retry may run the request again (it sold
-- nothing), unless the marker is no longer ours.
-- KEYS[1] the idempotency key; ARGV[1] our pending marker's beginning
-- 'pending:<random>:' (the time after it moves with idempotency_beat.lua,
-- and is unknown when the claim's reply was lost): no other marker nor any
-- answer begins so.
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
