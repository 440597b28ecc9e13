-- The fenced stage's SET: record the sale only if no holder with a newer
-- fencing token has read or written the SKU since this holder read it.
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] fence
-- ARGV[1] new stock, ARGV[2] units sold, ARGV[3] token
-- Returns 1 when written, 0 when fenced off (nothing written).
if tonumber(ARGV[3]) < tonumber(redis.call('GET', KEYS[3]) or '0') then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('INCRBY', KEYS[2], ARGV[2])
return 1
