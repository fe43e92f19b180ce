-- A waiter gives up (its wait ran out or was aborted, or its process has no caller left): leaves
-- the line, and tells whether release.lua handed it the lock in the meantime (then the caller
-- owns it after all).
--
-- KEYS[1] value, KEYS[2] fence, KEYS[3] line, KEYS[4] entries (as in acquire.lua)
-- ARGV[1] token
-- Returns {1, nowMs, fence} when the token holds the lock, {0, nowMs} otherwise.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == ARGV[1] .. '*' then
  return {1, now, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
return {0, now}
