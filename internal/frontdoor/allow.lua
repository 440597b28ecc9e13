-- allow: one event of every limit in KEYS, all or nothing (gcra.lua,
-- put before it). Returns 1 when every limit admits it (each key's TAT moved
-- on), else {i, retry_after} for the first limit i that refuses: an
-- admission, the common answer, is an integer the client reads without
-- building a list.
redis.replicate_commands()

local new_tats, refusal = gcra_judge(1, 1)
if not new_tats then
  return refusal
end
gcra_spend(1, new_tats)
return 1
