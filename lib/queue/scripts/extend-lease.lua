-- Sets a lease to expire `ms` from now, if the lease token is still current.
--
-- KEYS[1] leased    zset: id -> lease expiry (ms)
-- KEYS[2] tokens    hash: id -> lease token of the current lease
-- ARGV[1] id
-- ARGV[2] token     the lease token the caller got from claim
-- ARGV[3] ms        new remaining lease time
--
-- Returns the new lease expiry (Redis time, ms), or 0 when the token is stale (nothing changes).

if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
local t = redis.call('TIME')
local expiry = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], expiry, ARGV[1])
return expiry
