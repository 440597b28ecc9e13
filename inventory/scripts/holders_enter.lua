-- A sale entered its critical section: count it for its replica and keep the
-- largest number of sales seen inside at once.
-- KEYS[1] holders hash (replica -> sales inside), KEYS[2] max holders
-- ARGV[1] the replica. Returns the number of sales inside now.
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
local inside = 0
for _, n in ipairs(redis.call('HVALS', KEYS[1])) do
  inside = inside + tonumber(n)
end
if inside > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], inside)
end
return inside
