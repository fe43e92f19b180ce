-- Gives a leased task back unfinished without counting the attempt (graceful shutdown): it is
-- ready again at once. Only if the lease token is still current.
--
-- KEYS[1] due       zset: id -> due time (ms)
-- KEYS[2] leased    zset: id -> lease expiry (ms)
-- KEYS[3] tokens    hash: id -> lease token of the current lease
-- KEYS[4] attempts  hash: id -> claims so far
-- KEYS[5] wake      list: wake-up marker for idle workers (at most one element)
-- ARGV[1] id
-- ARGV[2] token     the lease token the caller got from claim
--
-- Returns 1 when released, 0 when the token is stale (nothing changes).

if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if redis.call('HINCRBY', KEYS[4], ARGV[1], -1) <= 0 then redis.call('HDEL', KEYS[4], ARGV[1]) end
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('LPUSH', KEYS[5], '1')
redis.call('LTRIM', KEYS[5], 0, 0)
return 1
