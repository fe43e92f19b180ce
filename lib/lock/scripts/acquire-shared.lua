-- Acquires a lock in shared mode (read lock): any number of shared holders, or one exclusive one.
-- Shared holders stand in a zset; while there are any, the lock's value holds the sentinel
-- '!shared' (with the waiters' mark '*' when someone waits), PX the longest shared TTL. So an
-- exclusive acquire (acquire.lua) needs no extra command: its SET NX fails on the sentinel and it
-- waits in the line like behind any holder. Fair: a shared caller never passes a live waiter in
-- the line (a waiting exclusive caller is not starved by a stream of shared ones); consecutive
-- shared waiters at the head of the line are granted together.
--
-- KEYS[1] value, KEYS[2] fence, KEYS[3] line, KEYS[4] entries (as in acquire.lua),
-- KEYS[5] shared (zset: shared holder token -> expiry ms, Redis clock), KEYS[6] channel
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

local SHARED = '!shared'
local value, fence, line, entries, shared, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token, ttl, entryTtl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[4])
local publish = ARGV[5] == '1' and 'SPUBLISH' or 'PUBLISH'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function currentFence()
  if ARGV[6] ~= '1' then return 0 end
  return tonumber(redis.call('GET', fence) or '0')
end

-- Granted while it waited (a shared caller before it was granted, see serveReaders).
local mine = redis.call('ZSCORE', shared, token)
if mine and tonumber(mine) > now then return {1, currentFence(), tonumber(mine) - now} end

-- As in acquire.lua: the first waiter whose entry is live; stale ones are dropped.
local function liveHead()
  while true do
    local head = redis.call('ZRANGE', line, 0, 0)[1]
    if not head then return nil, nil end
    local entry = redis.call('HGET', entries, head)
    if entry and tonumber(string.match(entry, '^%d+')) >= now then return head, entry end
    redis.call('ZREM', line, head)
    redis.call('HDEL', entries, head)
  end
end

-- Adds a shared holder: the sentinel lives as long as the longest shared holder, marked while
-- someone waits (so the last shared release hands the lock over).
local function addReader(reader, readerTtl)
  redis.call('ZREM', line, reader)
  redis.call('HDEL', entries, reader)
  redis.call('ZADD', shared, now + readerTtl, reader)
  local keep = tonumber(redis.call('ZRANGE', shared, -1, -1, 'WITHSCORES')[2]) - now
  local marked = redis.call('EXISTS', line) == 1
  redis.call('SET', value, marked and SHARED .. '*' or SHARED, 'PX', keep)
  redis.call('PEXPIRE', shared, keep)
end

-- Grants the shared waiters at the head of the line, up to the first exclusive one.
local function serveReaders()
  while true do
    local head, entry = liveHead()
    if not head then return end
    local readerTtl, mode = string.match(entry, '^%d+:(%d+):%d:(%a)$')
    if mode ~= 'r' then return end
    addReader(head, tonumber(readerTtl))
    redis.call(publish, channel, string.format('h %s %.0f %.0f %s 0', head, currentFence(), now, readerTtl))
  end
end

local v = redis.call('GET', value)
local free = not v or v == SHARED or v == SHARED .. '*'
if free then
  redis.call('ZREMRANGEBYSCORE', shared, '-inf', now)
  local head = liveHead()
  if not head or head == token then
    addReader(token, ttl)
    serveReaders()
    return {1, currentFence(), ttl}
  end
end
if ARGV[3] == '1' then
  local last = redis.call('ZRANGE', line, -1, -1, 'WITHSCORES')[2]
  redis.call('ZADD', line, 'NX', (tonumber(last) or 0) + 1, token)
  redis.call('HSET', entries, token, (now + entryTtl) .. ':' .. ttl .. ':' .. ARGV[6] .. ':r')
  redis.call('PEXPIRE', line, entryTtl * 2)
  redis.call('PEXPIRE', entries, entryTtl * 2)
  -- Mark the holder (exclusive or shared) so that its release hands over or wakes the line.
  if v and string.sub(v, -1) ~= '*' then redis.call('SET', value, v .. '*', 'KEEPTTL') end
end
return {0, now, free and -2 or redis.call('PTTL', value)}
