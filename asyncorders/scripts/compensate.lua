-- Returns the units of an order that will never stand, and frees its
-- buyer — once: the compensated set remembers the mark, so a replay (a
-- lost reply, a client's retry, a second worker or sweeper late with the
-- same order) changes nothing more. Two callers: a worker giving up a
-- stream entry (ARGV[2] its id), which also moves the entry to the
-- dead-letter stream and acknowledges it, every time; and the payment
-- sweeper after it cancelled an unpaid order (ARGV[2] "": no entry).
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] buyers, KEYS[4] compensated,
-- KEYS[5] stream, KEYS[6] dead;
-- ARGV[1] the mark (the order id, or "entry:<stream id>" for a malformed
-- entry), ARGV[2] the stream entry id or "", ARGV[3] the group, ARGV[4] the
-- reason, ARGV[5] qty to return (0: none, a malformed entry), ARGV[6] the
-- buyer to free ("" for none: a malformed entry, or a buyer whose order of
-- another id stands), ARGV[7] the entry's fields as the worker read them.
-- Returns 1 when it compensated, 0 when an earlier run had.
local first = redis.call('SADD', KEYS[4], ARGV[1]) == 1
if first then
  local qty = tonumber(ARGV[5])
  if qty > 0 then
    redis.call('INCRBY', KEYS[1], qty)
    redis.call('DECRBY', KEYS[2], qty)
    redis.call('PUBLISH', 'lockstep:stock-back', KEYS[1]) -- inventory.StockBackChannel
  end
  if ARGV[6] ~= '' then
    redis.call('SREM', KEYS[3], ARGV[6])
  end
  if ARGV[2] ~= '' then
    redis.call('XADD', KEYS[6], '*', 'entry', ARGV[2], 'mark', ARGV[1], 'reason', ARGV[4], 'returned', ARGV[5], 'fields', ARGV[7])
  end
end
if ARGV[2] ~= '' then
  redis.call('XACK', KEYS[5], ARGV[3], ARGV[2])
end
if first then
  return 1
end
return 0
