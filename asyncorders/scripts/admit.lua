-- Admits one sale of an async stage: checks the stock and the buyer, takes
-- the units, adds the buyer and, unless ARGV[3] is empty, appends the order
-- message to the stream. The buyer is checked by adding it: SADD answers 0
-- and writes nothing for a buyer already in the set; it comes after the
-- stock check and before the other writes, none of which fails on the
-- stage's own keys, so the script writes all of it or nothing. (SADD's
-- answer rather than a SISMEMBER first: one lookup of the buyers' set, not
-- two.) The message is one field the client packed (message.go), and the
-- entry's id carries the admission time: two arguments through Lua into
-- XADD, not ten (BENCHMARKS.md). The entry's second field is the SKU's
-- reset round, read here, in the script that takes the units, so the
-- worker inserts the order in the round its units came from (doc.go,
-- "Rounds").
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] buyers, KEYS[4] stream, KEYS[5]
-- round; ARGV[1] qty, ARGV[2] user, ARGV[3] the message, or "" for the
-- async-two-steps rung, whose caller enqueues it in a second call.
-- Returns {n, round}: n the remaining stock; -1 sold out, -2 no stock yet
-- (the caller initialises the SKU and retries), -3 the buyer has bought
-- already; round the SKU's round (0 when no reset ever set one).
local round = redis.call('GET', KEYS[5]) or '0'
local stock = redis.call('GET', KEYS[1])
if not stock then
  return {-2, tonumber(round)}
end
local qty = tonumber(ARGV[1])
if tonumber(stock) < qty then
  return {-1, tonumber(round)}
end
if redis.call('SADD', KEYS[3], ARGV[2]) == 0 then
  return {-3, tonumber(round)}
end
local remaining = redis.call('DECRBY', KEYS[1], qty)
redis.call('INCRBY', KEYS[2], qty)
if ARGV[3] ~= '' then
  redis.call('XADD', KEYS[4], '*', 'order', ARGV[3], 'round', round)
end
return {remaining, tonumber(round)}
