-- round_reset.lua: a reset's new round, never at or below the order
-- table's (ARGV[1], its floor): INCR of the round, raised to floor+1 when
-- Redis lost its keys and started counting again at 0.
-- KEYS[1] the SKU's round. Runs inside the reset's transaction.
-- Run twice (the reset sent again): the round moves once more, as a second
-- reset would. Late: a reset's rounds only grow. Reply lost: the reset
-- fails and is sent again.
local round = redis.call('INCR', KEYS[1])
local floor = tonumber(ARGV[1])
if round <= floor then
  round = floor + 1
  redis.call('SET', KEYS[1], round)
end
return round
