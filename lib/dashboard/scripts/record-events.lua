-- Records lock timeouts and lost locks for the dashboard's "recent" list, shared by every
-- instance: newest first, at most ARGV[1] entries, the list expiring ARGV[2] ms after the last
-- write. An instance sends what it saw in the last second in one call.
--
-- KEYS[1] recent   list of '<ms>|<json>' entries, newest first
-- ARGV[1] how many entries to keep at most
-- ARGV[2] TTL of the list in ms
-- ARGV[3..] the events as JSON (kind, keys, reason, instance, ...), oldest first
-- Returns the length of the list after trimming.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 3, #ARGV do redis.call('LPUSH', KEYS[1], now .. '|' .. ARGV[i]) end
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[1]) - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('LLEN', KEYS[1])
