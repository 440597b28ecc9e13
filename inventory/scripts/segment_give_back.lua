-- segmented-atomic's sale across segments that fell short: give back the
-- units it took from one segment.
-- KEYS[1] stock, KEYS[2] sold; ARGV[1] units taken.
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('DECRBY', KEYS[2], ARGV[1])
redis.call('PUBLISH', 'lockstep:stock-back', KEYS[1]) -- inventory.StockBackChannel
return 1
