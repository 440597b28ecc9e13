-- Watchdog renewal: extend the lock only while the owner still holds it.
-- It never shortens the lock: a renewal that reaches Redis late, after its
-- hold was released and the owner took the lock again with a longer lease,
-- must not cut that lease (the owner field is the same).
-- KEYS[1] lock hash; ARGV[1] lease in ms, ARGV[2] owner field
-- Returns 1 when renewed, 0 when the owner no longer holds the lock.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 1
end
return 0
