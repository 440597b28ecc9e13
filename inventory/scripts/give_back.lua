-- Give a sale's units back when its order was voided (never inserted) or
-- refused by the unique index: the stock, the sold counter and the buyer's
-- place, once per order id, and only what the sale is known to have taken.
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] buyers (user -> order id),
-- KEYS[4] given-back (the ids already given back), KEYS[5] round, KEYS[6]
-- taken (the ids order_deduct.lua took units for); all share the SKU's hash
-- tag. ARGV[1] qty, ARGV[2] user, ARGV[3] order id, ARGV[4] the proof that
-- the units were taken: the round they were taken in; "buyer" when the
-- buyers hash is the proof (one-per-user-lua: the units were taken if and
-- only if the buyer's entry holds this order id, which a reset deletes);
-- "taken" when the taken set is (order_deduct.lua: taken if and only if
-- the set holds the id, which a reset deletes).
-- Returns 1 when given back, 0 when this order id was given back before (the
-- script ran twice), -1 when there is nothing to give back: the round was
-- reset since (the units belonged to the stock the reset replaced), or the
-- buyers hash or the taken set shows the sale took nothing. The id is
-- marked given back in that last case too, so that a deduction arriving
-- late takes nothing.
local proof = ARGV[4]
if proof ~= 'buyer' and proof ~= 'taken' and (redis.call('GET', KEYS[5]) or '0') ~= proof then
  return -1
end
if redis.call('SADD', KEYS[4], ARGV[3]) == 0 then
  return 0
end
if proof == 'taken' then
  if redis.call('SREM', KEYS[6], ARGV[3]) == 0 then
    return -1
  end
elseif redis.call('HGET', KEYS[3], ARGV[2]) == ARGV[3] then
  redis.call('HDEL', KEYS[3], ARGV[2])
elseif proof == 'buyer' then
  return -1
end
redis.call('INCRBY', KEYS[1], tonumber(ARGV[1]))
redis.call('INCRBY', KEYS[2], -tonumber(ARGV[1]))
redis.call('PUBLISH', 'lockstep:stock-back', KEYS[1]) -- inventory.StockBackChannel
return 1
