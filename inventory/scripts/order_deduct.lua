-- The deduction of the order stages whose buyer check is a guard's (the
-- one-per-user naive, synchronized and lock rungs): atomic_deduct.lua that
-- also answers the SKU's reset round, which the order's insert must still
-- find (a reset between the two fences the insert out).
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] round; all share the SKU's hash tag.
-- ARGV[1] qty. Returns {remaining, round}; remaining is -1 when sold out,
-- -2 when the SKU has no stock yet.
local round = tonumber(redis.call('GET', KEYS[3]) or '0')
local stock = redis.call('GET', KEYS[1])
if not stock then
  return {-2, round}
end
local qty = tonumber(ARGV[1])
if tonumber(stock) < qty then
  return {-1, round}
end
local remaining = redis.call('DECRBY', KEYS[1], qty)
redis.call('INCRBY', KEYS[2], qty)
return {remaining, round}
