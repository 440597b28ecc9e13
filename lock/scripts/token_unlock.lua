-- Compare-and-delete for TokenLock (article case 5): delete the lock only
-- while it still holds our token, so an owner whose lock expired can never
-- delete the lock another owner has taken since.
-- KEYS[1] lock key; ARGV[1] owner token. Returns 1 if deleted, 0 otherwise.
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
