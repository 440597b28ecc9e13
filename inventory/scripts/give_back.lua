-- Give a sale's units back when its order was voided (never inserted) or
-- refused by the unique index: the stock, the sold counter and the sale's
-- record of its take, once per order id, and only what the sale is known
-- to have taken.
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] the record of takes (ARGV[4]
-- 'buyer': the buyers hash, user -> order id; 'taken': the set of order
-- ids that took units; else unused), KEYS[4] given-back (the ids already
-- given back), KEYS[5] round; all share the SKU's hash tag. ARGV[1] qty,
-- ARGV[2] user, ARGV[3] order id, ARGV[4] what proves the take: 'buyer'
-- (one-per-user-lua: the buyer's entry holds this order id), 'taken'
-- (order_deduct.lua: the id is in the taken set), or the round the units
-- were taken in (the sale saw its take's reply). A reset deletes the
-- buyers and the taken ids with the stock they were taken from.
-- Returns 1 when given back, 0 when this order id was given back before (the
-- script ran twice), -1 when there is nothing to give back: the round was
-- reset since (the units belonged to the stock the reset replaced), or the
-- record shows the sale took nothing. The id is marked given back in that
-- last case too, so that a deduction arriving late takes nothing.
local proof = ARGV[4]
local byRecord = proof == 'buyer' or proof == 'taken'
if not byRecord and (redis.call('GET', KEYS[5]) or '0') ~= proof then
  return -1
end
if redis.call('SADD', KEYS[4], ARGV[3]) == 0 then
  return 0
end
if proof == 'buyer' then
  if redis.call('HGET', KEYS[3], ARGV[2]) ~= ARGV[3] then
    return -1
  end
  redis.call('HDEL', KEYS[3], ARGV[2])
elseif proof == 'taken' then
  if redis.call('SREM', KEYS[3], ARGV[3]) == 0 then
    return -1
  end
end
redis.call('INCRBY', KEYS[1], tonumber(ARGV[1]))
redis.call('INCRBY', KEYS[2], -tonumber(ARGV[1]))
return 1
