-- Releases a shared hold (or gives up waiting for one): removes the token from the shared holders
-- and from the line. The last shared holder out hands the lock to the line's first live waiter
-- like release.lua does for an exclusive holder ('h' entry: the lock is its own, with a new
-- fence; 'w' or 'r' entry: it is woken), or publishes 'f' when nobody waits. While shared holders
-- remain, shared waiters now at the head (the waiter before them left) are granted.
--
-- KEYS as in acquire-shared.lua: value, fence, line, entries, shared, channel
-- ARGV[1] token, ARGV[2] sharded '1'|'0', ARGV[3] fenceTtl ms (as in acquire.lua)
-- Returns 1 when the token held the lock in shared mode (released now), else 0.

local SHARED = '!shared'
local value, fence, line, entries, shared, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token = ARGV[1]
local publish = ARGV[2] == '1' and 'SPUBLISH' or 'PUBLISH'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

redis.call('ZREM', line, token)
redis.call('HDEL', entries, token)
local expiry = redis.call('ZSCORE', shared, token)
local held = expiry and tonumber(expiry) > now
redis.call('ZREM', shared, token)
redis.call('ZREMRANGEBYSCORE', shared, '-inf', now)

local v = redis.call('GET', value)
if v ~= SHARED and v ~= SHARED .. '*' then return held and 1 or 0 end

-- The first live waiter and its entry; stale ones are dropped.
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

local function fenceOf(fencing)
  if fencing ~= '1' then return 0 end
  return tonumber(redis.call('GET', fence) or '0')
end

if redis.call('ZCARD', shared) > 0 then
  local keep = tonumber(redis.call('ZRANGE', shared, -1, -1, 'WITHSCORES')[2]) - now
  while true do
    local head, entry = liveHead()
    if not head then break end
    local _, ttl, fencing, mode = string.match(entry, '^(%d+):(%d+):(%d):(%a)$')
    if mode ~= 'r' then break end
    redis.call('ZREM', line, head)
    redis.call('HDEL', entries, head)
    redis.call('ZADD', shared, now + tonumber(ttl), head)
    keep = math.max(keep, tonumber(ttl))
    redis.call(publish, channel, string.format('h %s %.0f %.0f %s 0', head, fenceOf(fencing), now, ttl))
  end
  local marked = redis.call('EXISTS', line) == 1
  redis.call('SET', value, marked and SHARED .. '*' or SHARED, 'PX', keep)
  redis.call('PEXPIRE', shared, keep)
  return held and 1 or 0
end

-- The last shared holder is out.
local head, entry = liveHead()
if not head then
  redis.call('DEL', value)
  if v ~= SHARED then redis.call(publish, channel, 'f') end
  return held and 1 or 0
end
local _, ttl, fencing, mode = string.match(entry, '^(%d+):(%d+):(%d):(%a)$')
if mode ~= 'h' then
  redis.call('DEL', value)
  redis.call(publish, channel, 'w ' .. head)
  return held and 1 or 0
end
redis.call('ZREM', line, head)
redis.call('HDEL', entries, head)
local others = redis.call('EXISTS', line)
redis.call('SET', value, others == 1 and head .. '*' or head, 'PX', ttl)
local f = 0
if fencing == '1' then
  -- As in acquire.lua: a new counter starts at Redis TIME in microseconds.
  f = redis.call('INCR', fence)
  if f == 1 then
    local seed = t[1] .. string.sub('00000' .. t[2], -6)
    redis.call('SET', fence, seed, 'PX', ARGV[3])
    f = tonumber(seed)
  end
end
redis.call(publish, channel, string.format('h %s %.0f %.0f %s %d', head, f, now, ttl, others))
return held and 1 or 0
