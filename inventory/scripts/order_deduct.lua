-- The deduction of the order stages whose buyer check is a guard's (the
-- one-per-user naive, synchronized and lock rungs): atomic_deduct.lua that
-- also answers the SKU's reset round, which the order's insert must still
-- find (a reset between the two fences the insert out), and records the
-- sale's order id with the units it took, so that a run whose reply was
-- lost is recognised by the id: run again, it takes nothing more; given
-- back (give_back.lua, proof "taken"), its units return once.
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] round, KEYS[4] taken (the order ids
-- that took units), KEYS[5] given-back (the order ids given back); all
-- share the SKU's hash tag. ARGV[1] qty, ARGV[2] order id.
-- Returns {remaining, round}; remaining is -1 when sold out, -2 when the
-- SKU has no stock yet, -4 when this order id was given back (it never
-- takes a unit again).
-- One MGET reads the round and the stock (false when missing).
local got = redis.call('MGET', KEYS[3], KEYS[1])
local round = tonumber(got[1] or '0')
local stock = got[2]
if not stock then
  return {-2, round}
end
if redis.call('SISMEMBER', KEYS[5], ARGV[2]) == 1 then
  return {-4, round}
end
-- SADD both checks and records the id: one command on the common path.
if redis.call('SADD', KEYS[4], ARGV[2]) == 0 then
  return {tonumber(stock), round}
end
local qty = tonumber(ARGV[1])
if tonumber(stock) < qty then
  redis.call('SREM', KEYS[4], ARGV[2])
  return {-1, round}
end
local remaining = redis.call('DECRBY', KEYS[1], qty)
redis.call('INCRBY', KEYS[2], qty)
return {remaining, round}
