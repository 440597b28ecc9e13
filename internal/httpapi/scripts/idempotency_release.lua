-- Deletes our pending marker so a retry may run the request again (it sold
-- nothing), unless the marker is no longer ours.
-- KEYS[1] the idempotency key; ARGV[1] our pending marker.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
