-- one-per-user-lua: check the stock and the buyer, deduct, and record the
-- buyer, in one script (一人一单 without a lock).
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] buyers (a hash of user -> order id),
-- KEYS[4] given-back (the order ids given back), KEYS[5] round; all share
-- the SKU's hash tag. ARGV[1] qty, ARGV[2] user, ARGV[3] order id.
-- Returns {n, round}: n is the remaining stock, -1 when sold out, -2 when
-- the SKU has no stock yet (the caller initialises it and retries), -3 when
-- the user already bought, -4 when this order id was given back (voided:
-- it never takes a unit again); round is the SKU's reset round, which the
-- order's insert must still find. The buyer's order id, not a set member,
-- is kept so that a script run twice for one sale (a reply lost, a client
-- retrying) recognises its own purchase and takes nothing more.
-- One MGET reads the round and the stock (false when missing).
local got = redis.call('MGET', KEYS[5], KEYS[1])
local round = tonumber(got[1] or '0')
local stock = got[2]
if not stock then
  return {-2, round}
end
if redis.call('SISMEMBER', KEYS[4], ARGV[3]) == 1 then
  return {-4, round}
end
-- HSETNX both checks and records the buyer: one command on the common path.
if redis.call('HSETNX', KEYS[3], ARGV[2], ARGV[3]) == 0 then
  if redis.call('HGET', KEYS[3], ARGV[2]) == ARGV[3] then
    return {tonumber(stock), round}
  end
  return {-3, round}
end
local qty = tonumber(ARGV[1])
if tonumber(stock) < qty then
  redis.call('HDEL', KEYS[3], ARGV[2])
  return {-1, round}
end
local remaining = redis.call('DECRBY', KEYS[1], qty)
redis.call('INCRBY', KEYS[2], qty)
return {remaining, round}
