-- GCRA over one or more limits at once, all or nothing: redis_rate v10's
-- allowN algorithm (Copyright (c) 2017 Pavel Pravosud, rwz/redis-gcra),
-- run for every key before any is written, so a request refused by one
-- limit spends no token of another. A chunk of functions, put before
-- the script that calls them (Script): frontdoor's allow.lua, or a sale's
-- script that judges the limits and sells in one run (inventory's admit.lua).
--   KEYS[first_key + i - 1]   the i-th limit's key
--   ARGV[first_arg + 3i - 3], [+1], [+2]
--                             its burst, rate (events) and period (seconds)

-- gcra_judge returns the limits' new TATs when every limit admits one
-- more event, else nil and {i, retry_after} for the first limit i that
-- refuses. It writes nothing.
local function gcra_judge(first_key, first_arg)
  local jan_1_2017 = 1483228800
  local t = redis.call("TIME")
  local now = (t[1] - jan_1_2017) + (t[2] / 1000000)
  local new_tats = {now = now}
  for i = 1, #KEYS - first_key + 1 do
    local key = KEYS[first_key + i - 1]
    local a = first_arg + 3 * i - 3
    local burst = tonumber(ARGV[a])
    local rate = tonumber(ARGV[a + 1])
    local period = tonumber(ARGV[a + 2])
    local emission_interval = period / rate
    local tat = tonumber(redis.call("GET", key)) or now
    tat = math.max(tat, now)
    local new_tat = tat + emission_interval
    local diff = now - (new_tat - emission_interval * burst)
    if diff < 0 then
      return nil, {i, tostring(-diff)}
    end
    new_tats[i] = new_tat
  end
  return new_tats
end

-- gcra_spend moves each limit's TAT on: the tokens of an admitted event.
local function gcra_spend(first_key, new_tats)
  for i, new_tat in ipairs(new_tats) do
    local reset_after = new_tat - new_tats.now
    if reset_after > 0 then
      redis.call("SET", KEYS[first_key + i - 1], new_tat, "EX", math.ceil(reset_after))
    end
  end
end
