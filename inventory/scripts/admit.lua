-- Put before a sale's script, after gcra.lua (frontdoor.WithGCRA): the
-- front door's limits, KEYS[3...] with ARGV[2...], judged in the sale's
-- own run. A refusal ends the script with {i, retry_after}: nothing sold,
-- no token spent. An admission spends its tokens, unless the SKU has no
-- stock yet: the sale's script answers -2 then, and the caller
-- initialises the SKU and runs it again.
redis.replicate_commands()
local new_tats, refusal = gcra_judge(3, 2)
if not new_tats then
  return refusal
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  gcra_spend(3, new_tats)
end
