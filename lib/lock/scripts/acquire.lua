-- Acquires one or more locks for one token, all or nothing.
--
-- KEYS, 4 per lock:  value (string: holder token, PX ttl), fence (counter, never expires),
--                    line (zset: waiting tokens in arrival order), entries (hash: token -> entry)
-- ARGV[1] token        fresh random value of this acquisition
-- ARGV[2] ttl          lock TTL in ms
-- ARGV[3] fencing      '1': INCR the fence counter of each lock and return it
-- ARGV[4] respectLine  '1': a free lock whose line has a live waiter is not free for this token
-- ARGV[5] join         '1': if not granted, join the line (or renew this token's place in it);
--                      single lock only. '0' promises the token never joined a line.
-- ARGV[6] entryTtl     ms a line entry stays live without being renewed by its waiter
--
-- Returns {1, nowMs, fence_1, ..., fence_n} when granted (fence 0 when fencing is off);
--         {0, nowMs, wait} when not: wait = holder's PTTL, -1 for a holder without TTL,
--         -2 when the lock is free but another waiter is first in line.
-- An entry is "deadlineMs:ttlMs:fencing" so that release.lua can hand the lock over directly.

local token = ARGV[1]
local ttl = tonumber(ARGV[2])
local fencing = ARGV[3] == '1'
local respectLine = ARGV[4] == '1'
local join = ARGV[5] == '1'
local entryTtl = tonumber(ARGV[6])
local n = #KEYS / 4
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Already ours: release.lua handed it to this token while it waited in line. Only a token that
-- joined the line can be handed the lock (an attempt that does not join has a token never seen).
if join and n == 1 and redis.call('GET', KEYS[1]) == token then
  redis.call('ZREM', KEYS[3], token)
  redis.call('HDEL', KEYS[4], token)
  return {1, now, tonumber(redis.call('GET', KEYS[2]) or '0')}
end

-- The first waiter in line whose entry is still live; entries of waiters that stopped renewing
-- (crashed, gave up) are dropped on the way.
local function liveHead(line, entries)
  while true do
    local head = redis.call('ZRANGE', line, 0, 0)[1]
    if not head then return nil end
    local entry = redis.call('HGET', entries, head)
    if entry and tonumber(string.match(entry, '^%d+')) >= now then return head end
    redis.call('ZREM', line, head)
    redis.call('HDEL', entries, head)
  end
end

for i = 0, n - 1 do
  local value, line, entries = KEYS[i * 4 + 1], KEYS[i * 4 + 3], KEYS[i * 4 + 4]
  local wait = nil
  local pttl = redis.call('PTTL', value)
  if pttl ~= -2 then
    wait = pttl
  elseif respectLine then
    local head = liveHead(line, entries)
    if head and head ~= token then wait = -2 end
  end
  if wait then
    if join and n == 1 then
      -- Score = last score + 1: strict arrival order, independent of clocks. NX keeps the place
      -- of a waiter that is only renewing its entry.
      local last = redis.call('ZRANGE', line, -1, -1, 'WITHSCORES')[2]
      redis.call('ZADD', line, 'NX', (tonumber(last) or 0) + 1, token)
      redis.call('HSET', entries, token, (now + entryTtl) .. ':' .. ttl .. ':' .. ARGV[3])
      -- The line lives as long as someone renews it.
      redis.call('PEXPIRE', line, entryTtl * 2)
      redis.call('PEXPIRE', entries, entryTtl * 2)
    end
    return {0, now, wait}
  end
end

local result = {1, now}
for i = 0, n - 1 do
  redis.call('SET', KEYS[i * 4 + 1], token, 'PX', ttl)
  if join then
    redis.call('ZREM', KEYS[i * 4 + 3], token)
    redis.call('HDEL', KEYS[i * 4 + 4], token)
  end
  result[i + 3] = fencing and redis.call('INCR', KEYS[i * 4 + 2]) or 0
end
return result
