-- Sets a lease to expire `ms` from now, if the lease token is still current, and tells the holder
-- whether a cancel was asked for meanwhile (the way a worker learns it when the cancel's pub/sub
-- message was lost).
--
-- KEYS[1] leased    zset: id -> lease expiry (ms)
-- KEYS[2] tokens    hash: id -> lease token of the current lease
-- KEYS[3] cancels   hash: id -> reason, for leased tasks a cancel was asked for
-- ARGV[1] id
-- ARGV[2] token     the lease token the caller got from claim
-- ARGV[3] ms        new remaining lease time
--
-- Returns {expiry, cancel}: the new lease expiry (Redis time, ms), or 0 when the token is stale
-- (nothing changes); cancel is the cancel's reason, or false.

if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return {0, false} end
local t = redis.call('TIME')
local expiry = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], expiry, ARGV[1])
return {expiry, redis.call('HGET', KEYS[3], ARGV[1])}
