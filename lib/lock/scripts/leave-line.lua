-- A waiter gives up (its wait ran out or was aborted, or its process has no caller left): leaves
-- the line, and tells whether release.lua handed it the lock in the meantime (then the caller
-- owns it after all). Otherwise it serves whoever its leaving lets in (serveAfterLeaving), so
-- that they do not wait for their next check.
--
-- KEYS   value, fence, line, entries, shared, channel (see shared-common.lua, put before this)
-- ARGV[1] token, ARGV[2] sharded '1'|'0', ARGV[3] fenceTtl ms (as in acquire.lua)
-- Returns {1, nowMs, fence} when the token holds the lock, {0, nowMs} otherwise.

local token = ARGV[1]
redis.call('ZREM', line, token)
redis.call('HDEL', entries, token)
local v = redis.call('GET', value)
if v == token or v == token .. '*' then return {1, now, lastFence(fence)} end
serveAfterLeaving(v, ARGV[2] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[3])
return {0, now}
