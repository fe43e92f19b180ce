-- Variant: the library's script before its arguments became strings (Lua numbers given to
-- redis.call, each formatted by Redis with %.17g).
-- Sliding-window rate limit: a log of what was admitted in the last `windowMs`. Admits `cost`
-- more units when those already in the window plus `cost` stay within `limit`, so no window of
-- `windowMs` (on the Redis clock) ever admits more than `limit`. A refusal writes nothing.
--
-- KEYS[1] log     ZSET: member "<call id>:<n>" -> time admitted (ms, Redis TIME, with µs)
-- ARGV[1] limit   units per window (a positive integer)
-- ARGV[2] window  windowMs
-- ARGV[3] cost    units this call takes (1 .. limit)
-- ARGV[4] id      an id unique to this call (members of one call are "<id>:1" .. "<id>:<cost>")
--
-- Returns { allowed (1 or 0), remaining, retryAfterMs, resetMs }: remaining units now;
-- retryAfterMs (refused) until `cost` units fit; resetMs until the window is empty.

local limit, window, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
-- An entry admitted at s counts while now < s + window.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local used = redis.call('ZCARD', KEYS[1])
if used + cost <= limit then
  local args = {}
  for n = 1, cost do
    args[2 * n - 1] = now
    args[2 * n] = ARGV[4] .. ':' .. n
  end
  redis.call('ZADD', KEYS[1], unpack(args))
  redis.call('PEXPIRE', KEYS[1], window)
  return { 1, limit - used - cost, 0, window }
end
-- Refused: `cost` fits once the (used + cost - limit) oldest entries have left the window.
local oldest = redis.call('ZRANGE', KEYS[1], used + cost - limit - 1, used + cost - limit - 1, 'WITHSCORES')
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
return {
  0,
  limit - used,
  math.max(1, math.ceil(tonumber(oldest[2]) + window - now)),
  math.max(1, math.ceil(tonumber(newest[2]) + window - now)),
}
