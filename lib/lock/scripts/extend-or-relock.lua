-- Quorum mode, on one node: extends locks the token still holds and, while the client's deadline
-- on this node's own clock has not passed, locks again those this node lost (a restart without
-- persistence, an expiry while the node was unreachable), so that the node counts toward the
-- majority again.
--
-- The deadline is checked here, not by the client: an extension sent while the lock was valid can
-- wait in a socket buffer (a partition) and run after the lock lapsed, after someone else took and
-- released it; locking again then would revive a lost lock on this node. The client computes the
-- deadline as a lower bound of this node's clock at the moment the lock's validity ends
-- (quorum-clocks.ts), so a relock that runs before it runs while the lock surely still holds a
-- majority, when nobody else can hold one.
--
-- KEYS  the value key of each lock
-- ARGV[1] token, ARGV[2] ttl in ms,
-- ARGV[3] relockBefore  this node's Redis TIME in ms before which a missing lock may be set again
--                       ('0': never)
-- Returns {state, nowMs}: state 1 when every lock was held by the token and is extended; 2 when at
-- least one was missing and was locked again (the others extended); 0 when at least one is held by
-- another token, or is missing and the deadline passed (then nothing is changed). nowMs is this
-- node's Redis TIME in ms (rounded down). A value may carry the waiters' mark ('*', see
-- quorum-acquire.lua), which is kept.

local token, marked = ARGV[1], ARGV[1] .. '*'
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Microseconds count: a deadline of 1000 ms is not met at 999.5 ms rounded down.
local relock = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000 < tonumber(ARGV[3])
local missing = false
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if not v then
    if not relock then return {0, nowMs} end
    missing = true
  elseif v ~= token and v ~= marked then
    return {0, nowMs}
  end
end
for i = 1, #KEYS do
  if not redis.call('SET', KEYS[i], token, 'NX', 'PX', ARGV[2]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
if missing then return {2, nowMs} end
return {1, nowMs}
