-- A sale left its critical section.
-- KEYS[1] holders hash (replica -> sales inside); ARGV[1] the replica.
if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
