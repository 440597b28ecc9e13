-- Release the last level a Mutex's Client holds: Redisson's unlock when the
-- count reaches 0, in two commands instead of three. The Client knows it is
-- its last level, so it need not read the count first, and a Mutex's hash
-- holds no field but its owner's: deleting that field deletes the key.
-- KEYS[1] lock hash, KEYS[2] unlock channel; ARGV[1] owner field
-- Returns nil when the owner does not hold the lock, 1 when it was released
-- and waiters were told.
if redis.call('hdel', KEYS[1], ARGV[1]) == 0 then
    return nil
end
-- The message names the releasing owner, so its own waiters can tell
-- their Client's unlocks from those of others.
redis.call('publish', KEYS[2], 'u' .. ARGV[1])
return 1
