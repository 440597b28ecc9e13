-- Returns the units of an order that will never stand, and frees its
-- buyer — once: the compensated set remembers the mark, so a replay (a
-- lost reply, a client's retry, a second worker or sweeper late with the
-- same order) changes nothing more. Two callers: a worker giving up a
-- stream entry (ARGV[2] its id), which also moves the entry to the
-- dead-letter stream and acknowledges it, every time; and the payment
-- sweeper after it cancelled an unpaid order (ARGV[2] "": no entry).
-- Only within the round the order's units were taken in (ARGV[8]): after
-- a reset the units belong to the stock the reset replaced, the buyer to
-- the set it emptied and the entry to the stream it emptied, so a caller
-- late with an order of an earlier round changes nothing (but the entry's
-- XACK, a no-op then). So does a SKU without its stock (Redis lost its
-- data): the units belong to a stock that is gone, and an INCRBY would
-- make a stock without the SKU's other keys.
-- KEYS[1] stock, KEYS[2] sold, KEYS[3] buyers, KEYS[4] compensated,
-- KEYS[5] stream, KEYS[6] dead, KEYS[7] round;
-- ARGV[1] the mark (the order id, or "entry:<stream id>" for a malformed
-- entry), ARGV[2] the stream entry id or "", ARGV[3] the group, ARGV[4] the
-- reason, ARGV[5] qty to return (0: none, a malformed entry), ARGV[6] the
-- buyer to free ("" for none: a malformed entry, or a buyer whose order of
-- another id stands), ARGV[7] the entry's fields as the worker read them,
-- ARGV[8] the order's round ("" for a malformed entry, which has none and
-- returns nothing).
-- Returns 1 when it compensated, 0 when an earlier run had, -1 when the
-- round is over.
if ARGV[8] ~= '' and (redis.call('EXISTS', KEYS[1]) == 0 or (redis.call('GET', KEYS[7]) or '0') ~= ARGV[8]) then
  if ARGV[2] ~= '' then
    redis.call('XACK', KEYS[5], ARGV[3], ARGV[2])
  end
  return -1
end
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
