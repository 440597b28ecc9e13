-- The fenced stage's GET: read the stock as the holder ARGV[2] of fencing
-- token ARGV[1], and set the SKU's fence to "<token>:<holder>", so that only
-- this holder can write what it read: a holder with an older token (its lock
-- lost to expiry or a pause), or with the same token (a failover that lost
-- the lock also lost the token counter's increment, so the promoted replica
-- hands that token out again), can no longer write back a stale read.
-- KEYS[1] stock, KEYS[2] fence (the newest holder that read)
-- Returns the stock, -2 when the SKU has no stock yet, -3 when a newer
-- holder already came through (this one's lock is lost).
local token = tonumber(ARGV[1])
local fence = redis.call('GET', KEYS[2])
if fence and token < tonumber(string.match(fence, '^%d+')) then
  return -3
end
local stock = redis.call('GET', KEYS[1])
if not stock then
  return -2
end
redis.call('SET', KEYS[2], ARGV[1] .. ':' .. ARGV[2])
return tonumber(stock)
