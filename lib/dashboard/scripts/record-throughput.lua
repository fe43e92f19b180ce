-- Adds the tasks one instance completed in the last second to a queue's throughput counters
-- (one field per Redis-clock second), dropping seconds older than the window.
--
-- KEYS[1] throughput   hash: epoch second -> tasks completed in it (by every instance)
-- ARGV[1] tasks completed since the last call
-- ARGV[2] window: seconds kept
-- Returns the number of seconds (fields) kept.

local now = tonumber(redis.call('TIME')[1])
local window = tonumber(ARGV[2])
redis.call('HINCRBY', KEYS[1], now, ARGV[1])
-- One field per second at most: prune only once the window is clearly exceeded.
if redis.call('HLEN', KEYS[1]) > window + 10 then
  for _, second in ipairs(redis.call('HKEYS', KEYS[1])) do
    if tonumber(second) <= now - window then redis.call('HDEL', KEYS[1], second) end
  end
end
redis.call('PEXPIRE', KEYS[1], window * 1000)
return redis.call('HLEN', KEYS[1])
