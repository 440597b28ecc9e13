-- Claims an armed fire-once fault of a stage (crash_holding_lock,
-- pause_before_write), once across all replicas: the first replica to reach
-- the fault's moment after it was set disarms it and fires it; the others go on.
-- KEYS[1] the stage's faults hash; ARGV[1] the fault's field.
-- Returns 1 to the claimer, else 0.
if redis.call('HGET', KEYS[1], ARGV[1]) == 'true' then
  redis.call('HSET', KEYS[1], ARGV[1], 'false')
  return 1
end
return 0
