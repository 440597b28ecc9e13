-- GCRA over one or more limits at once, all or nothing: redis_rate v10's
-- allowN algorithm (Copyright (c) 2017 Pavel Pravosud, rwz/redis-gcra),
-- run for every key before any is written, so a request refused by one
-- limit spends no token of another.
--   KEYS[i]                 the i-th limit's key
--   ARGV[3i-2], [3i-1], [3i] its burst, rate (events) and period (seconds)
-- Returns 1 when every limit admits one more event (each key's TAT moved
-- on), else {i, retry_after} for the first limit i that refuses: an
-- admission, the common answer, is an integer the client reads without
-- building a list.
redis.replicate_commands()

local jan_1_2017 = 1483228800
local t = redis.call("TIME")
local now = (t[1] - jan_1_2017) + (t[2] / 1000000)

local new_tats = {}
for i, key in ipairs(KEYS) do
  local burst = tonumber(ARGV[3 * i - 2])
  local rate = tonumber(ARGV[3 * i - 1])
  local period = tonumber(ARGV[3 * i])
  local emission_interval = period / rate
  local tat = tonumber(redis.call("GET", key)) or now
  tat = math.max(tat, now)
  local new_tat = tat + emission_interval
  local diff = now - (new_tat - emission_interval * burst)
  if diff < 0 then
    return {i, tostring(-diff)}
  end
  new_tats[i] = new_tat
end

for i, key in ipairs(KEYS) do
  local reset_after = new_tats[i] - now
  if reset_after > 0 then
    redis.call("SET", key, new_tats[i], "EX", math.ceil(reset_after))
  end
end
return 1
