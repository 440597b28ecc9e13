-- The atomic stage: check and deduct in one script, no lock.
-- KEYS[1] stock, KEYS[2] sold; ARGV[1] qty.
-- Returns the remaining stock, -1 when sold out, -2 when the SKU has no stock
-- yet (the caller initialises it and retries).
local stock = redis.call('GET', KEYS[1])
if not stock then
  return -2
end
local qty = tonumber(ARGV[1])
if tonumber(stock) < qty then
  return -1
end
-- DECRBY rather than SET of a number Lua computed: Redis does the
-- arithmetic and Lua formats no string.
local remaining = redis.call('DECRBY', KEYS[1], qty)
redis.call('INCRBY', KEYS[2], qty)
return remaining
