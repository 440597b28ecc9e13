-- Watchdog renewal: extend the lock only while it holds the renewing hold.
-- The hold token, not the owner, decides: a renewal that reaches Redis late,
-- after its hold was released and the same owner took the lock again, finds
-- another token and leaves that later hold's TTL alone. It never shortens
-- the lock either (a reentrant level may hold a longer lease).
-- KEYS[1] lock hash; ARGV[1] lease in ms, ARGV[2] the field that holds the
-- hold's token ('hold'; the write lock's is its owner's write field's),
-- ARGV[3] the hold's token
-- Returns 1 when renewed, 0 when the lock no longer holds this hold.
if redis.call('hget', KEYS[1], ARGV[2]) == ARGV[3] then
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return 1
end
return 0
