-- segmented-atomic's sale across segments: take up to ARGV[1] units from
-- one segment, as many as it holds, recording them sold.
-- KEYS[1] stock, KEYS[2] sold; ARGV[1] units still wanted.
-- Returns the units taken, -2 when the segment has no stock keys.
local stock = redis.call('GET', KEYS[1])
if not stock then
  return -2
end
local take = math.min(tonumber(stock), tonumber(ARGV[1]))
if take > 0 then
  redis.call('DECRBY', KEYS[1], take)
  redis.call('INCRBY', KEYS[2], take)
end
return take
