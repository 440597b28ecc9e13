-- Watchdog renewal of a read lock: the hash and every read level's timeout key.
-- KEYS[1] lock hash; ARGV[1] lease ms, ARGV[2] the hold's token (its field),
-- ARGV[3] the lock's read-timeout prefix (read_unlock.lua)
-- Returns 1 when renewed, 0 when the hold has no read level (a late
-- renewal of an earlier hold finds nothing: each hold has its own field).
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return 0
end
-- Never shorten (renew.lua): the levels may hold longer leases.
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
end
for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local n = tonumber(redis.call('hget', KEYS[1], field))
    if type(n) == 'number' then
        for i = n, 1, -1 do
            local level = ARGV[3] .. ':' .. field .. ':' .. i
            if redis.call('pttl', level) < tonumber(ARGV[1]) then
                redis.call('pexpire', level, ARGV[1])
            end
        end
    end
end
return 1
