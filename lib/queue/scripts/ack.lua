-- Finishes a leased task: removes it with its payload, if the lease token is still current.
--
-- KEYS[1] leased    zset: id -> lease expiry (ms)
-- KEYS[2] tokens    hash: id -> lease token of the current lease
-- KEYS[3] payload   hash: id -> JSON payload
-- KEYS[4] attempts  hash: id -> claims so far
-- ARGV[1] id
-- ARGV[2] token     the lease token the caller got from claim
--
-- Returns 1 when acked, 0 when the token is stale (the lease expired and the task was returned or
-- claimed again): then nothing changes. A lease that expired but was not yet returned by a claim
-- is still current.

if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
return 1
