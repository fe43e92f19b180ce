-- Gives a leased task back after a failed attempt, if the lease token is still current: to the
-- queue after `delayMs`, or to the dead-letter set when its attempts reached `maxAttempts`.
-- The attempt count and the payload are kept.
--
-- KEYS[1] due       zset: id -> due time (ms)
-- KEYS[2] leased    zset: id -> lease expiry (ms)
-- KEYS[3] tokens    hash: id -> lease token of the current lease
-- KEYS[4] attempts  hash: id -> claims so far
-- KEYS[5] dead      zset: id -> time of death (ms)
-- KEYS[6] wake      list: wake-up marker for idle workers (at most one element)
-- ARGV[1] id
-- ARGV[2] token        the lease token the caller got from claim
-- ARGV[3] delayMs      the task is due again at Redis TIME + delayMs
-- ARGV[4] maxAttempts
--
-- Returns 1 when requeued, 2 when moved to dead letter, 0 when the token is stale (nothing
-- changes).

if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
if tonumber(redis.call('HGET', KEYS[4], ARGV[1]) or '0') >= tonumber(ARGV[4]) then
  redis.call('ZADD', KEYS[5], now, ARGV[1])
  return 2
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('LPUSH', KEYS[6], '1')
redis.call('LTRIM', KEYS[6], 0, 0)
return 1
