-- The deduction of the order stages whose buyer check is a guard's (the
-- one-per-user naive, synchronized and lock rungs): atomic_deduct.lua under
-- the sale's order id, which it records as taken, and that also answers the
-- SKU's reset round, which the order's insert must still find (a reset
-- between the two fences the insert out).
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] taken (the order ids that took
-- units this round), KEYS[4] given-back (the order ids given back),
-- KEYS[5] round; all share the SKU's hash tag. ARGV[1] qty, ARGV[2] user
-- (unused: one_per_user.lua's arguments), ARGV[3] order id.
-- Returns {n, round}: n is the remaining stock, -1 when sold out, -2 when
-- the SKU has no stock yet, -4 when this order id was given back (a run
-- arriving late takes nothing). A run sent again for the same sale (its
-- reply lost) finds its id taken and takes nothing more; the taken ids
-- are what a give-back, or the resolver of a sale whose every reply was
-- lost, checks before it returns units.
local round = tonumber(redis.call('GET', KEYS[5]) or '0')
local stock = redis.call('GET', KEYS[1])
if not stock then
  return {-2, round}
end
if redis.call('SISMEMBER', KEYS[4], ARGV[3]) == 1 then
  return {-4, round}
end
if redis.call('SISMEMBER', KEYS[3], ARGV[3]) == 1 then
  return {tonumber(stock), round}
end
local qty = tonumber(ARGV[1])
if tonumber(stock) < qty then
  return {-1, round}
end
local remaining = redis.call('DECRBY', KEYS[1], qty)
redis.call('INCRBY', KEYS[2], qty)
redis.call('SADD', KEYS[3], ARGV[3])
return {remaining, round}
