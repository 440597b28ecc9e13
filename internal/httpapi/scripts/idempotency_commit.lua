-- Makes our claim of an idempotency key durable right before the stock
-- write: from then on the sale may happen, so the marker must outlive any
-- retry that could sell again, unless it is replaced by the answer.
-- KEYS[1] the idempotency key; ARGV[1] our pending marker's beginning
-- 'pending:<random>:' (its time moves with idempotency_beat.lua), ARGV[2]
-- its new TTL in ms.
-- Returns 1, or 0 when the marker is no longer ours (the sale must not go on).
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
