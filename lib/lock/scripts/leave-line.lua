-- A waiter gives up (its wait ran out or was aborted, its process has no caller left, or a call
-- with its token failed): leaves the line, and gives back a lock release.lua handed to it in the
-- meantime, handing it over as release.lua does, in this same call: a leaver that gives up during
-- a stall is not answered, and a second call to release it might never be sent. Otherwise it
-- serves whoever its leaving lets in (serveAfterLeaving), so that they do not wait for their next
-- check.
--
-- KEYS   value, fence, line, entries, shared, channel (see shared-common.lua, put before this)
-- ARGV[1] token, ARGV[2] sharded '1'|'0', ARGV[3] fenceTtl ms (as in acquire.lua)
-- Returns {1, nowMs, fence} when the token held the lock (released now; fence was its fence),
-- {0, nowMs} otherwise.

local token = ARGV[1]
local publish = ARGV[2] == '1' and 'SPUBLISH' or 'PUBLISH'
redis.call('ZREM', line, token)
redis.call('HDEL', entries, token)
local v = redis.call('GET', value)
if v == token then
  redis.call('DEL', value)
  return {1, now, lastFence(fence)}
end
if v == token .. '*' then
  local f = lastFence(fence)
  if not handOver(value, fence, line, entries, channel, publish, ARGV[3], now) then
    redis.call('DEL', value)
    redis.call(publish, channel, 'f')
  end
  return {1, now, f}
end
serveAfterLeaving(v, publish, ARGV[3])
return {0, now}
