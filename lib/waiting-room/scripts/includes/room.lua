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
--   KEYS[6] leases   zset: instance id -> its lease's expiry (Redis ms), renewed every absent / 3
--                    by each instance with visitors parked in `wait`
--   KEYS[7] parkedBy hash: visitor parked in `wait` -> instance id. A parked visitor's `seen` score
--                    is +inf: its instance's lease stands for it (one renewal per instance, not
--                    one per visitor); `<room>:parked:<instance>` (a set, same hash tag) lists
--                    the visitors of one instance, for when its lease runs out
--   KEYS[5] channel  pub/sub channel of the room: JSON messages
--                    {a = admitted visitors, n = next, h = head ticket, r = rate, t = Redis now,
--                     p = passTtl, x = absent}
-- Every script takes ARGV[1] sharded ('1': SPUBLISH on Cluster, else PUBLISH).

local room, line, seen, passes, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local leases, parkedBy = KEYS[6], KEYS[7]
local publishCommand = ARGV[1] == '1' and 'SPUBLISH' or 'PUBLISH'
-- Bounds the work of one call: visitors dropped for absence, visitors admitted.
local MAX_BATCH = 1000

-- The set of the visitors parked on `instance`.
local function parkedSet(instance)
  return room .. ':parked:' .. instance
end

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

-- Ticket of the first visitor in line, or 0 when nobody waits; read once per script, after the
-- line last changed (`lineChanged`).
local headCache = nil
local function headTicket()
  if not headCache then
    headCache = tonumber(redis.call('ZRANGE', line, 0, 0, 'WITHSCORES')[2]) or 0
  end
  return headCache
end
local function lineChanged()
  headCache = nil
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

-- Lets the state expire once nobody comes: the line when nobody was seen and no instance renewed
-- a lease for `absent` ms (passes expire with the last one, in `admit`).
local function keepFor(s)
  for _, key in ipairs({ line, seen, leases, parkedBy }) do redis.call('PEXPIRE', key, s.absent) end
end

-- Parks `visitor` on `instance` (it waits in `wait` there): its instance's lease stands for it.
local function park(s, visitor, instance)
  local before = redis.call('HGET', parkedBy, visitor)
  if before and before ~= instance then redis.call('SREM', parkedSet(before), visitor) end
  redis.call('HSET', parkedBy, visitor, instance)
  local set = parkedSet(instance)
  redis.call('SADD', set, visitor)
  redis.call('PEXPIRE', set, s.absent * 2)
  redis.call('ZADD', seen, '+inf', visitor)
  redis.call('ZADD', leases, clock() + s.absent, instance)
end

-- Ends the parking of `visitors` (admitted, or their instance gone): their instances' sets and
-- `parkedBy` forget them.
local function unparkAll(visitors)
  if #visitors == 0 then return end
  local by = redis.call('HMGET', parkedBy, unpack(visitors))
  local sets = {}
  for i, instance in ipairs(by) do
    if instance then
      sets[instance] = sets[instance] or {}
      table.insert(sets[instance], visitors[i])
    end
  end
  for instance, members in pairs(sets) do
    redis.call('SREM', parkedSet(instance), unpack(members))
  end
  redis.call('HDEL', parkedBy, unpack(visitors))
end

-- Instances whose lease ran out (crashed, cut off): their parked visitors count as last seen a
-- third of `absent` after the lease's last renewal, so they lose their places soon unless they
-- come back.
local function recoverLeases(s)
  local dead = redis.call('ZRANGEBYSCORE', leases, '-inf', clock(), 'WITHSCORES', 'LIMIT', 0, 10)
  for i = 1, #dead, 2 do
    local set = parkedSet(dead[i])
    local seenAt = tonumber(dead[i + 1]) - s.absent * 2 / 3
    local visitors = redis.call('SMEMBERS', set)
    for _, visitor in ipairs(visitors) do
      redis.call('ZADD', seen, 'XX', seenAt, visitor)
      redis.call('HDEL', parkedBy, visitor)
    end
    redis.call('DEL', set)
    redis.call('ZREM', leases, dead[i])
  end
end

-- Drops the visitors not seen for `absent` ms (at most MAX_BATCH per call).
local function prune(s)
  local now = clock()
  recoverLeases(s)
  local gone = redis.call('ZRANGEBYSCORE', seen, '-inf', now - s.absent, 'LIMIT', 0, MAX_BATCH)
  if #gone > 0 then
    lineChanged()
    redis.call('ZREM', line, unpack(gone))
    redis.call('ZREM', seen, unpack(gone))
    unparkAll(gone)
  end
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
  lineChanged()
  local admitted, passArgs = {}, {}
  for i = 1, #popped, 2 do
    admitted[#admitted + 1] = popped[i]
    passArgs[#passArgs + 1] = now + s.passTtl
    passArgs[#passArgs + 1] = popped[i]
    s.cursor = tonumber(popped[i + 1])
  end
  local n = #admitted
  if n > 0 then
    redis.call('ZADD', passes, unpack(passArgs))
    redis.call('ZREM', seen, unpack(admitted))
    unparkAll(admitted)
  end
  if n < due then
    s.next = math.max(s.next + n * interval, now)
  else
    s.next = s.next + n * interval
  end
  redis.call('HSET', room, 'next', fmt(s.next), 'cursor', s.cursor)
  if n > 0 then
    -- Expired passes go as new ones come (`hasPass` reads the expiry; the key expires whole).
    redis.call('ZREMRANGEBYSCORE', passes, '-inf', now)
    local ttl = redis.call('PTTL', passes)
    if ttl < s.passTtl then redis.call('PEXPIRE', passes, s.passTtl) end
    publish(s, admitted)
  end
end
