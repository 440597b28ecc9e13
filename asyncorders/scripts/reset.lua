-- Gives an async SKU its stock, its buyer set, its order stream with the
-- workers' group, and its dead-letter stream: every key the admission and
-- dead-letter scripts declare, so that they all exist whenever those run
-- (a Redis Cluster refuses a multi-key script with a key missing while
-- its slot moves). The buyer set and the compensated set hold the empty
-- string, which is never a buyer (orders.ValidateUser) nor an order id.
-- KEYS[1] initial, KEYS[2] stock, KEYS[3] sold, KEYS[4] buyers,
-- KEYS[5] compensated, KEYS[6] stream, KEYS[7] dead;
-- ARGV[1] the stock, ARGV[2] the workers' group, ARGV[3] "1" to start over
-- (a reset), "0" to keep a SKU that has its keys (a lazy first sale).
-- Returns 1 when it wrote, 0 when the SKU had its keys already.
if ARGV[3] ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], 0)
redis.call('SADD', KEYS[4], '')
redis.call('SADD', KEYS[5], '')
redis.call('XGROUP', 'CREATE', KEYS[6], ARGV[2], '0', 'MKSTREAM')
redis.call('XGROUP', 'CREATE', KEYS[7], ARGV[2], '0', 'MKSTREAM')
return 1
