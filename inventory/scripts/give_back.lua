-- Give a sale's units back when its order was voided (never inserted) or
-- refused by the unique index: the stock, the sold counter and the buyer's
-- place, once per order id.
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] buyers (user -> order id),
-- KEYS[4] given-back (the ids already given back); all share the SKU's hash
-- tag. ARGV[1] qty, ARGV[2] user, ARGV[3] order id.
-- Returns 1 when given back, 0 when this order id was given back before (the
-- script ran twice).
if redis.call('SADD', KEYS[4], ARGV[3]) == 0 then
  return 0
end
redis.call('INCRBY', KEYS[1], tonumber(ARGV[1]))
redis.call('INCRBY', KEYS[2], -tonumber(ARGV[1]))
if redis.call('HGET', KEYS[3], ARGV[2]) == ARGV[3] then
  redis.call('HDEL', KEYS[3], ARGV[2])
end
return 1
