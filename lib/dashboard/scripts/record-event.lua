-- Records one lock timeout or lost lock for the dashboard's "recent" list, shared by every
-- instance: newest first, at most ARGV[2] entries, the list expiring ARGV[3] ms after the last one.
--
-- KEYS[1] recent   list of '<ms>|<json>' entries, newest first
-- ARGV[1] the event as JSON (kind, keys, reason, instance, ...)
-- ARGV[2] how many entries to keep at most
-- ARGV[3] TTL of the list in ms
-- Returns the length of the list after trimming.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('LPUSH', KEYS[1], now .. '|' .. ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return redis.call('LLEN', KEYS[1])
