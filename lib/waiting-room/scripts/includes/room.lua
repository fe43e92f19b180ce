-- Shared part of the waiting room scripts: put after lib/waiting/scripts/line.lua (for clock())
-- and before each of them when they are loaded (waiting-room-scripts.ts).
--
-- Keys of one room (all under one hash tag, so one Cluster slot), in this order:
--   KEYS[1] room     hash: 'rate' (admitPerSecond), 'passTtl', 'absent' (ms), 'next' (Redis ms
--                    at which the next visitor may be admitted), 'seq' (last ticket), 'cursor'
--                    (ticket of the last visitor admitted)
--   KEYS[2] line     zset: visitor -> ticket (join order)
--   KEYS[3] seen     zset: visitor in line -> last time it was seen (Redis ms)
--   KEYS[4] passes   zset: admitted visitor -> pass expiry (Redis ms)
--   KEYS[5] channel  pub/sub channel of the room: JSON messages
--                    {a = admitted visitors, n = next, h = head ticket, r = rate, t = Redis now,
--                     p = passTtl, x = absent}
-- Every script takes ARGV[1] sharded ('1': SPUBLISH on Cluster, else PUBLISH).

local room, line, seen, passes, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local publishCommand = ARGV[1] == '1' and 'SPUBLISH' or 'PUBLISH'
-- Bounds the work of one call: visitors dropped for absence, visitors admitted.
local MAX_BATCH = 1000

-- The room's settings, or nil when it is not open.
local function settings()
  local s = redis.call('HMGET', room, 'rate', 'passTtl', 'absent', 'next', 'cursor')
  if not s[1] then return nil end
  return {
    rate = tonumber(s[1]),
    passTtl = tonumber(s[2]),
    absent = tonumber(s[3]),
    next = tonumber(s[4]) or clock(),
    cursor = tonumber(s[5]) or 0,
  }
end

-- Ticket of the first visitor in line, or 0 when nobody waits.
local function headTicket()
  local head = redis.call('ZRANGE', line, 0, 0, 'WITHSCORES')[2]
  return tonumber(head) or 0
end

local function fmt(ms)
  return string.format('%.3f', ms)
end

local function publish(s, admitted)
  redis.call(publishCommand, channel, cjson.encode({
    a = admitted, n = fmt(s.next), h = headTicket(), r = tostring(s.rate), t = clock(),
    p = s.passTtl, x = s.absent,
  }))
end

-- What every reply about the room starts with: Redis now, next admission, rate, head ticket,
-- absent ms.
local function state(s)
  return { clock(), fmt(s.next), tostring(s.rate), headTicket(), s.absent }
end

-- Lets the state expire once nobody comes: the line when nobody was seen for `absent` ms, passes
-- when the last one has expired.
local function keepFor(s)
  redis.call('PEXPIRE', line, s.absent)
  redis.call('PEXPIRE', seen, s.absent)
end

-- Drops the visitors not seen for `absent` ms (at most MAX_BATCH per call) and expired passes.
local function prune(s)
  local now = clock()
  local gone = redis.call('ZRANGEBYSCORE', seen, '-inf', now - s.absent, 'LIMIT', 0, MAX_BATCH)
  if #gone > 0 then
    redis.call('ZREM', line, unpack(gone))
    redis.call('ZREM', seen, unpack(gone))
  end
  redis.call('ZREMRANGEBYSCORE', passes, '-inf', now)
end

-- Admits the visitors whose turn has come, first in line first: one per 1000 / rate ms of Redis
-- time since `next`. Credit does not pile up while the line is empty: `next` is then not earlier
-- than now. Publishes the admitted visitors. Rate 0: nobody is admitted (the room holds).
local function admit(s)
  if s.rate <= 0 then return end
  local now = clock()
  if s.next > now then return end
  local interval = 1000 / s.rate
  local due = math.min(math.floor((now - s.next) / interval) + 1, MAX_BATCH)
  local popped = redis.call('ZPOPMIN', line, due)
  local admitted = {}
  for i = 1, #popped, 2 do
    local visitor = popped[i]
    admitted[#admitted + 1] = visitor
    redis.call('ZADD', passes, now + s.passTtl, visitor)
    redis.call('ZREM', seen, visitor)
    s.cursor = tonumber(popped[i + 1])
  end
  local n = #admitted
  if n < due then
    s.next = math.max(s.next + n * interval, now)
  else
    s.next = s.next + n * interval
  end
  redis.call('HSET', room, 'next', fmt(s.next), 'cursor', s.cursor)
  if n > 0 then
    local ttl = redis.call('PTTL', passes)
    if ttl < s.passTtl then redis.call('PEXPIRE', passes, s.passTtl) end
    publish(s, admitted)
  end
end
