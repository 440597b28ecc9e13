-- Gives an async SKU its stock, its buyer set, its order stream with the
-- workers' group, and its dead-letter stream: every key the admission and
-- dead-letter scripts declare, so that they all exist whenever those run
-- (a Redis Cluster refuses a multi-key script with a key missing while
-- its slot moves). The buyer set and the compensated set hold the empty
-- string, which is never a buyer (orders.ValidateUser) nor an order id.
-- A reset moves the SKU's round on (doc.go, "Rounds"): the round key is
-- never deleted, so a round is never used twice. The order stream is
-- emptied (XTRIM) rather than deleted, so it keeps its last entry id and
-- the new round's entries never take the id of an entry a worker still
-- holds from the round before (an XACK of that id must not acknowledge a
-- new entry); its group is made again, without the old pending entries.
-- The round never falls behind the order table's (ARGV[4], the floor):
-- Redis that lost its data (a restart without persistence, an AOF that
-- lost its last second) starts again with no round key, while the table
-- keeps its round and refuses a lower one as a late reset's; so a reset
-- moves the round past the floor and an initialise sets it to the floor
-- at least, and the next entries are of the table's round.
-- KEYS[1] initial, KEYS[2] stock, KEYS[3] sold, KEYS[4] buyers,
-- KEYS[5] compensated, KEYS[6] stream, KEYS[7] dead, KEYS[8] round;
-- ARGV[1] the stock, ARGV[2] the workers' group, ARGV[3] "1" to start over
-- (a reset), "0" to keep a SKU that has its keys (a lazy first sale),
-- ARGV[4] the order table's round (the floor).
-- Returns the SKU's round: the new one after a reset, the current one
-- otherwise (the floor at least; 0 when neither store has one).
local floor = tonumber(ARGV[4])
local was = tonumber(redis.call('GET', KEYS[8]) or '0')
local round = was
if ARGV[3] == '1' then
  round = math.max(was, floor) + 1
elseif was < floor then
  round = floor
end
if round ~= was then
  redis.call('SET', KEYS[8], round)
end
if ARGV[3] ~= '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  return round
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[7])
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], 0)
redis.call('SADD', KEYS[4], '')
redis.call('SADD', KEYS[5], '')
if redis.call('EXISTS', KEYS[6]) == 1 then
  redis.call('XTRIM', KEYS[6], 'MAXLEN', 0)
  redis.call('XGROUP', 'DESTROY', KEYS[6], ARGV[2])
end
redis.call('XGROUP', 'CREATE', KEYS[6], ARGV[2], '0', 'MKSTREAM')
redis.call('XGROUP', 'CREATE', KEYS[7], ARGV[2], '0', 'MKSTREAM')
return round
