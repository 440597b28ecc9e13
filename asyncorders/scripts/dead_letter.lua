-- Moves one stream entry to the dead-letter stream and acknowledges it; for
-- an order the shop admitted, it also returns its units to stock and frees
-- its buyer — once: the compensated set remembers the mark, so a replay
-- (a lost reply, a client's retry, a second worker's late dead-letter of
-- the same order) only acknowledges again.
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] buyers, KEYS[4] compensated,
-- KEYS[5] stream, KEYS[6] dead;
-- ARGV[1] the mark (the order id, or "entry:<stream id>" for a malformed
-- entry), ARGV[2] the stream entry id, ARGV[3] the group, ARGV[4] the
-- reason, ARGV[5] qty to return (0: none, a malformed entry), ARGV[6] the
-- buyer to free ("" for none: a malformed entry, or a buyer whose order of
-- another id stands), ARGV[7] the entry's fields as the worker read them.
-- Returns 1 when it moved the entry, 0 when an earlier run had.
local first = redis.call('SADD', KEYS[4], ARGV[1]) == 1
if first then
  local qty = tonumber(ARGV[5])
  if qty > 0 then
    redis.call('INCRBY', KEYS[1], qty)
    redis.call('DECRBY', KEYS[2], qty)
  end
  if ARGV[6] ~= '' then
    redis.call('SREM', KEYS[3], ARGV[6])
  end
  redis.call('XADD', KEYS[6], '*', 'entry', ARGV[2], 'mark', ARGV[1], 'reason', ARGV[4], 'returned', ARGV[5], 'fields', ARGV[7])
end
redis.call('XACK', KEYS[5], ARGV[3], ARGV[2])
if first then
  return 1
end
return 0
