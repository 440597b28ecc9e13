-- Adopt a pending order resolution whose owner's heartbeat lapsed: the
-- entry is rewritten with the adopter as its owner only if it is still the
-- one the adopter read, so of the replicas that saw the same dead owner one
-- adopts it, and an entry resolved (deleted) meanwhile is not brought back.
-- KEYS[1] the stage's pending-orders hash (order id -> entry). ARGV[1] the
-- order id, ARGV[2] the entry as read, ARGV[3] the entry naming the adopter.
-- Returns 1 when adopted, or already adopted by this adopter (the script
-- ran twice, its first reply lost); 0 when the entry changed or is gone.
local entry = redis.call('HGET', KEYS[1], ARGV[1])
if entry == ARGV[3] then
  return 1
end
if entry ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
