-- The fenced stage's SET: record the sale only if the SKU's fence still names
-- this holder's read, i.e. nobody read the stock since (a newer token, or
-- the same token handed out again after a failover), and the read itself
-- was not lost with the master it went to.
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] fence
-- ARGV[1] new stock, ARGV[2] units sold, ARGV[3] token, ARGV[4] holder
-- Returns 1 when written, 0 when fenced off (nothing written).
if redis.call('GET', KEYS[3]) ~= ARGV[3] .. ':' .. ARGV[4] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('INCRBY', KEYS[2], ARGV[2])
return 1
