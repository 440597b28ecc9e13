-- Claims the armed crash-while-holding fault of a stage, once across all
-- replicas: the first replica to acquire its lock after the fault was set
-- disarms it and crashes; the others go on.
-- KEYS[1] the stage's faults hash. Returns 1 to the claimer, else 0.
if redis.call('HGET', KEYS[1], 'crash_holding_lock') == 'true' then
  redis.call('HSET', KEYS[1], 'crash_holding_lock', 'false')
  return 1
end
return 0
