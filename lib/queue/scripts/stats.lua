-- Counts the tasks of a queue by state, at one instant.
--
-- KEYS[1] due       zset: id -> due time (ms)
-- KEYS[2] leased    zset: id -> lease expiry (ms)
-- KEYS[3] dead      zset: id -> time of death (ms)
--
-- Returns {ready, delayed, leased, dead}: ready = due <= now, delayed = due > now; leased includes
-- expired leases that no claim has returned yet.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {
  redis.call('ZCOUNT', KEYS[1], '-inf', now),
  redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf'),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
}
