-- Undo one segment's part of a sale across segments whose other parts
-- could not be written (Redis Cluster: one transaction per segment). The
-- seller still holds the segment's lock, so the stock is the part's own
-- write exactly when that write landed.
-- KEYS[1] stock, KEYS[2] sold; ARGV[1] the stock the part wrote, ARGV[2] the
-- stock before it, ARGV[3] the units it took.
-- Returns 1 when undone, 0 when the part had not landed.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('INCRBY', KEYS[2], -tonumber(ARGV[3]))
redis.call('PUBLISH', 'lockstep:stock-back', KEYS[1]) -- inventory.StockBackChannel
return 1
