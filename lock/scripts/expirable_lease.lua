-- Set the lease of the permit named ARGV[6] of a PermitExpirableSemaphore
-- to ARGV[3] ms from now (Redisson's updateLeaseTime), or read the permits
-- available when ARGV[6] is empty; the permits whose lease ended come back
-- first. KEYS, ARGV[4..5]: leases.lua (ARGV[1..2] are unused: setting a
-- lease again from a later now is harmless, and a permit given back is
-- not leased again). Returns 1 when the permit is taken and its lease set,
-- 0 when it is not taken; with no permit, the permits available.
local now = nowMs()
reclaim(now)
if ARGV[6] == '' then
    return tonumber(redis.call('get', KEYS[1]) or '0')
end
if not redis.call('zscore', KEYS[4], ARGV[6]) then
    return 0
end
redis.call('zadd', KEYS[4], now + tonumber(ARGV[3]), ARGV[6])
return 1
