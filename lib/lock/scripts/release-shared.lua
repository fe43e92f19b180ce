-- Releases a shared hold (or gives up waiting for one): removes the token from the shared holders
-- and from the line. The last shared holder out hands the lock to the line's first live waiter
-- like release.lua does for an exclusive holder ('h' entry: the lock is its own, with a new
-- fence; 'w' or 'r' entry: it is woken), or publishes 'f' when nobody waits. While shared holders
-- remain, shared waiters now at the head (the waiter before them left) are granted.
--
-- KEYS   value, fence, line, entries, shared, channel (see shared-common.lua, put before this)
-- ARGV[1] token, ARGV[2] sharded '1'|'0', ARGV[3] fenceTtl ms (as in acquire.lua)
-- Returns 1 when the token held the lock in shared mode (released now), else 0.

local token = ARGV[1]
local publish = ARGV[2] == '1' and 'SPUBLISH' or 'PUBLISH'

redis.call('ZREM', line, token)
redis.call('HDEL', entries, token)
local expiry = redis.call('ZSCORE', shared, token)
local held = (expiry and tonumber(expiry) > now) and 1 or 0
redis.call('ZREM', shared, token)
redis.call('ZREMRANGEBYSCORE', shared, '-inf', now)

local v = redis.call('GET', value)
if v ~= SHARED and v ~= SHARED .. '*' then
  -- Not held shared: this was a waiter giving up.
  serveAfterLeaving(v, publish, ARGV[3])
  return held
end

if redis.call('ZCARD', shared) > 0 then
  -- Shared holders remain: refresh the sentinel, and let in readers now at the head.
  local keep = tonumber(redis.call('ZRANGE', shared, -1, -1, 'WITHSCORES')[2]) - now
  local marked = redis.call('EXISTS', line) == 1
  redis.call('SET', value, marked and SHARED .. '*' or SHARED, 'PX', keep)
  redis.call('PEXPIRE', shared, keep)
  serveReaders(publish)
  return held
end

-- The last shared holder is out.
if not handOver(value, fence, line, entries, channel, publish, ARGV[3], now) then
  redis.call('DEL', value)
  if v ~= SHARED then redis.call(publish, channel, 'f') end
end
return held
