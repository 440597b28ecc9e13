-- Lazily gives a never-reset SKU (or segment) its default stock, unless it has
-- one already: another replica may have raced us to it.
-- KEYS[1] initial, KEYS[2] stock, KEYS[3] sold; ARGV[1] the stock.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], 0)
return 1
