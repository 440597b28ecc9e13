-- The fenced stage's reset: new stock, no sales, the lock dropped, and the
-- fence moved to the newest token handed out so far, so that no holder from
-- before the reset can write into the new stock (its commit finds a fence
-- that does not name it), while every later holder, with a larger token,
-- reads and writes as usual. Tokens keep growing across resets.
-- KEYS[1] initial, KEYS[2] stock, KEYS[3] sold, KEYS[4] foreign unlocks,
-- KEYS[5] lock, KEYS[6] fence, KEYS[7] the lock's token counter
-- ARGV[1] the new stock
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], 0)
redis.call('DEL', KEYS[4], KEYS[5])
redis.call('SET', KEYS[6], (redis.call('GET', KEYS[7]) or '0') .. ':reset')
return 1
