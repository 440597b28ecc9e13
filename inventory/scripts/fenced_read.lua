-- The fenced stage's GET: read the stock as the holder of fencing token
-- ARGV[1], and raise the SKU's fence to it, so that a holder with an older
-- token (its lock lost to expiry, a pause or a failover) can no longer write
-- what it read before this holder did.
-- KEYS[1] stock, KEYS[2] fence (the newest token that read or wrote)
-- Returns the stock, -2 when the SKU has no stock yet, -3 when a newer
-- holder already came through (this one's lock is lost).
local token = tonumber(ARGV[1])
if token < tonumber(redis.call('GET', KEYS[2]) or '0') then
  return -3
end
local stock = redis.call('GET', KEYS[1])
if not stock then
  return -2
end
redis.call('SET', KEYS[2], token)
return tonumber(stock)
