-- Acquires a lock in shared mode (read lock): any number of shared holders, or one exclusive one.
-- Shared holders stand in a zset; while there are any, the lock's value holds the sentinel
-- '!shared' (with the waiters' mark '*' when someone waits), PX the longest shared TTL. So an
-- exclusive acquire (acquire.lua) needs no extra command: its SET NX fails on the sentinel and it
-- waits in the line like behind any holder. Fair: a shared caller never passes a live waiter in
-- the line (a waiting exclusive caller is not starved by a stream of shared ones); consecutive
-- shared waiters at the head of the line are granted together.
--
-- KEYS   value, fence, line, entries, shared, channel (see shared-common.lua, put before this)
-- ARGV[1] token     fresh random value of this acquisition (its place in line when waiting)
-- ARGV[2] ttl       ms
-- ARGV[3] wait      '1': a caller that is not granted joins the line with a reader entry ('r',
--                   which release.lua only wakes) or keeps its place; '0': it does not wait
-- ARGV[4] entryTtl  ms a line entry stays live without being refreshed (a waiting shared caller
--                   refreshes its entry by calling this script again about once a second)
-- ARGV[5] sharded   '1': publish with SPUBLISH (Cluster)
-- ARGV[6] fencing   '1': report the fence counter (shared grants do not increment it)
--
-- Returns {1, fence, remainingMs} when granted (now, or while it waited); {0, nowMs, wait} when
-- not: wait = the exclusive holder's PTTL, -2 when a waiter is first in line.
-- Publishes 'h <token> <fence> <nowMs> <ttlMs> 0' for each shared waiter granted with it.

local token, ttl, entryTtl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local publish = ARGV[5] == '1' and 'SPUBLISH' or 'PUBLISH'

-- Granted while it waited (by a shared caller before it, see serveReaders).
local mine = redis.call('ZSCORE', shared, token)
if mine and tonumber(mine) > now then return {1, currentFence(ARGV[6]), tonumber(mine) - now} end

local v = redis.call('GET', value)
local free = not v or v == SHARED or v == SHARED .. '*'
if free then
  local head = liveHead(line, entries, now)
  if not head or head == token then
    addReader(token, ttl)
    -- Expired holders go after the grant's ZADD, the script's first write (see addReader): a
    -- removal first let every write after it through on a full Redis (noeviction). They score
    -- below now, so the sentinel's PX (the longest hold) is the same either way.
    redis.call('ZREMRANGEBYSCORE', shared, '-inf', now)
    serveReaders(publish)
    return {1, currentFence(ARGV[6]), ttl}
  end
end
if ARGV[3] == '1' then
  joinLine(line, entries, token, ttl .. ':' .. ARGV[6] .. ':r', entryTtl, now)
  -- The holder may be exclusive or shared.
  markWaited(value, v)
end
return {0, now, free and -2 or redis.call('PTTL', value)}
