-- Watchdog renewal of a read lock: the hash and every read level's timeout key.
-- KEYS[1] lock hash, KEYS[2] key prefix; ARGV[1] lease ms, ARGV[2] owner
-- Returns 1 when renewed, 0 when the owner holds no read level.
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return 0
end
redis.call('pexpire', KEYS[1], ARGV[1])
for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local n = tonumber(redis.call('hget', KEYS[1], field))
    if type(n) == 'number' then
        for i = n, 1, -1 do
            redis.call('pexpire', KEYS[2] .. ':' .. field .. ':rwlock_timeout:' .. i, ARGV[1])
        end
    end
end
return 1
