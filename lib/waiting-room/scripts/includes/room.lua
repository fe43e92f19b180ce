-- Shared part of the waiting room scripts: put after lib/waiting/scripts/line.lua (for clock())
-- and before each of them when they are loaded (waiting-room-scripts.ts).
--
-- Keys of one room (all under one hash tag, so one Cluster slot), in this order:
--   KEYS[1] room     hash: 'rate' (admitPerSecond), 'passTtl', 'absent' (ms), 'next' (Redis ms
--                    at which the next visitor may be admitted: one interval after the last
--                    admission's turn, or now for an empty line), 'seq' (last ticket), 'cursor'
--                    (ticket of the last visitor admitted), 'trim' (Redis ms from which the
--                    next admission trims the expired passes and extends the passes' TTL),
--                    'at' (Redis ms of the last admission made by an instance's admission timer,
--                    advance.lua: the calls come every 400 ms from it; the ETA counts them)
--   KEYS[2] line     zset: visitor -> ticket (join order)
--   KEYS[3] seen     zset: visitor in line -> last time it was seen (Redis ms)
--   KEYS[4] passes   zset: admitted visitor -> pass expiry (Redis ms)
--   KEYS[6] leases   zset: instance id -> its lease's expiry (Redis ms), renewed every absent / 3
--                    by each instance with visitors parked in `wait`
--   KEYS[7] parkedBy hash: visitor parked in `wait` -> the ids of the instances it waits on,
--                    space-separated (most often one; two tabs on two instances: both, and it
--                    stays parked until the last of them unparks it). A parked visitor's `seen`
--                    score is +inf: its instances' leases stand for it (one renewal per instance,
--                    not one per visitor); `<room>:parkedz:<instance>` (a zset, same hash tag:
--                    visitor -> ticket; named apart from the sets of earlier versions, `:parked:`,
--                    so that instances of both during a rolling deploy never meet the other type)
--                    lists the visitors of one instance, for when its lease runs out.
--                    An admission leaves its visitors there (and in `seen`): the instance's next
--                    join with a `wait` or lease renewal forgets those with tickets up to 'cursor'
--                    (`forgetAdmitted`), so an admission costs the same few commands however many
--                    are admitted, and an instance that keeps getting visitors keeps no more than
--                    those admitted since its last one
--   KEYS[5] channel  pub/sub channel of the room: JSON messages
--                    {a = admitted visitors, n = next, r = rate, t = Redis now, p = passTtl,
--                     x = absent, l = 'at', i = id of the instance whose timer's call admitted
--                     them ('' for any other call)}
-- Every script takes ARGV[1] sharded ('1': SPUBLISH on Cluster, else PUBLISH).

local room, line, seen, passes, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local leases, parkedBy = KEYS[6], KEYS[7]
local publishCommand = ARGV[1] == '1' and 'SPUBLISH' or 'PUBLISH'
-- Bounds the work of one call: visitors dropped for absence, visitors admitted.
local MAX_BATCH = 1000
-- Least time between two trims of the expired passes, in ms (admissions in between only add),
-- or passTtl when shorter: the passes key outlives its last pass by at most this.
local MAX_TRIM_EVERY = 5000

-- The zset of the visitors parked on `instance` (visitor -> ticket).
local function parkedSet(instance)
  return room .. ':parkedz:' .. instance
end

-- The room's settings, or nil when it is not open.
local function settings()
  local s = redis.call('HMGET', room, 'rate', 'passTtl', 'absent', 'next', 'cursor', 'trim', 'at',
    'seq')
  if not s[1] then return nil end
  return {
    rate = tonumber(s[1]),
    passTtl = tonumber(s[2]),
    absent = tonumber(s[3]),
    next = tonumber(s[4]) or clock(),
    cursor = tonumber(s[5]) or 0,
    trim = tonumber(s[6]) or 0,
    at = tonumber(s[7]) or 0,
    -- The last ticket given (join.lua keeps it current when it gives one).
    seq = tonumber(s[8]) or 0,
  }
end

local function fmt(ms)
  return string.format('%.3f', ms)
end

-- `instance`: the id of the instance whose call this is ('' for none).
local function publish(s, admitted, instance)
  redis.call(publishCommand, channel, cjson.encode({
    a = admitted, n = fmt(s.next), r = tostring(s.rate), t = clock(), p = s.passTtl,
    x = s.absent, l = s.at, i = instance,
  }))
end

-- What every reply about the room starts with: Redis now, next admission, rate, absent ms, 'at'.
local function state(s)
  return { clock(), fmt(s.next), tostring(s.rate), s.absent, s.at }
end

-- Lets the state expire once nobody comes: the line when nobody was seen and no instance renewed
-- a lease for `absent` ms (passes expire with the last one, in `admit`).
local function keepFor(s)
  for _, key in ipairs({ line, seen, leases, parkedBy }) do redis.call('PEXPIRE', key, s.absent) end
end

-- Parks `visitor` (in line with `ticket`) on `instance` (it waits in `wait` there): its
-- instance's lease stands for it. Parked on other instances too (another tab), it stays parked
-- there: each of them unparks it when its own wait ends.
local function park(s, visitor, ticket, instance)
  local by = redis.call('HGET', parkedBy, visitor)
  if not by then
    redis.call('HSET', parkedBy, visitor, instance)
  elseif not string.find(' ' .. by .. ' ', ' ' .. instance .. ' ', 1, true) then
    redis.call('HSET', parkedBy, visitor, by .. ' ' .. instance)
  end
  local set = parkedSet(instance)
  redis.call('ZADD', set, ticket, visitor)
  redis.call('PEXPIRE', set, s.absent * 2)
  redis.call('ZADD', seen, '+inf', visitor)
  redis.call('ZADD', leases, clock() + s.absent, instance)
end

-- Ends the parking of `visitors` (dropped for absence, or joining again after their pass): their
-- instances' sets and `parkedBy` forget them.
local function unparkAll(visitors)
  if #visitors == 0 then return end
  local by = redis.call('HMGET', parkedBy, unpack(visitors))
  local sets = {}
  for i = 1, #visitors do
    if by[i] then
      for instance in string.gmatch(by[i], '%S+') do
        sets[instance] = sets[instance] or {}
        table.insert(sets[instance], visitors[i])
      end
    end
  end
  for instance, members in pairs(sets) do
    redis.call('ZREM', parkedSet(instance), unpack(members))
  end
  redis.call('HDEL', parkedBy, unpack(visitors))
end

-- `instance` no longer parks `visitor` (its wait there ended, or its lease ran out); once no
-- instance does, the visitor counts as seen at `seenAt`, or leaves `seen` (nil: it was admitted).
local function unparkOn(visitor, instance, seenAt)
  local by = redis.call('HGET', parkedBy, visitor)
  if not by then return end
  local rest, found = {}, false
  for id in string.gmatch(by, '%S+') do
    if id == instance then found = true else rest[#rest + 1] = id end
  end
  if not found then return end
  if #rest > 0 then
    redis.call('HSET', parkedBy, visitor, table.concat(rest, ' '))
  else
    redis.call('HDEL', parkedBy, visitor)
    if seenAt then
      redis.call('ZADD', seen, 'XX', seenAt, visitor)
    else
      redis.call('ZREM', seen, visitor)
    end
  end
end

-- Instances whose lease ran out (crashed, cut off): their parked visitors count as last seen a
-- third of `absent` after the lease's last renewal, so they lose their places soon unless they
-- come back.
local function recoverLeases(s)
  local dead = redis.call('ZRANGEBYSCORE', leases, '-inf', clock(), 'WITHSCORES', 'LIMIT', 0, 10)
  for i = 1, #dead, 2 do
    local set = parkedSet(dead[i])
    local seenAt = tonumber(dead[i + 1]) - s.absent * 2 / 3
    local visitors = redis.call('ZRANGE', set, 0, -1)
    for _, visitor in ipairs(visitors) do unparkOn(visitor, dead[i], seenAt) end
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
    redis.call('ZREM', line, unpack(gone))
    redis.call('ZREM', seen, unpack(gone))
    unparkAll(gone)
  end
end

-- Forgets the visitors parked on `instance` that were admitted since (tickets up to 'cursor'):
-- run by its lease renewals and its joins with a `wait`, so that admissions need not. A visitor
-- also parked on other instances stays in `parkedBy` (and `seen`) until the last one forgets it.
local function forgetAdmitted(s, instance)
  local set = parkedSet(instance)
  local done = redis.call('ZRANGEBYSCORE', set, '-inf', s.cursor)
  for i = 1, #done, MAX_BATCH do
    local batch = { unpack(done, i, math.min(i + MAX_BATCH - 1, #done)) }
    local by = redis.call('HMGET', parkedBy, unpack(batch))
    local only = {}
    for j = 1, #batch do
      if by[j] == instance then
        only[#only + 1] = batch[j]
      elseif by[j] then
        unparkOn(batch[j], instance, nil)
      end
    end
    if #only > 0 then
      redis.call('HDEL', parkedBy, unpack(only))
      redis.call('ZREM', seen, unpack(only))
    end
  end
  if #done > 0 then redis.call('ZREMRANGEBYSCORE', set, '-inf', s.cursor) end
end

-- Admits the visitors whose turn has come, first in line first: one per 1000 / rate ms of Redis
-- time since `next` (a late call admits all that were due, and the pace keeps its slots). Credit
-- does not pile up while the line is empty: a call that leaves it empty sets `next` to now when
-- it admitted nobody, else to one interval after now (whoever joins next did not wait for the
-- slots that passed: an empty room lets one in at once, the next one a full interval later).
-- Publishes the admitted visitors, for the timer call of `instance` ('' for any other call: a
-- join, a presence check, `open`). Rate 0: nobody is admitted (the room holds). The admitted stay
-- in `seen` (and, parked, in their instance's set): `prune` and `forgetAdmitted` drop them later,
-- in one command for many.
local function admit(s, instance)
  if s.rate <= 0 then return end
  local now = clock()
  if s.next > now then return end
  local interval = 1000 / s.rate
  local due = math.min(math.floor((now - s.next) / interval) + 1, MAX_BATCH)
  local popped = redis.call('ZPOPMIN', line, due)
  local admitted, passArgs = {}, {}
  for i = 1, #popped, 2 do
    admitted[#admitted + 1] = popped[i]
    passArgs[#passArgs + 1] = now + s.passTtl
    passArgs[#passArgs + 1] = popped[i]
    s.cursor = tonumber(popped[i + 1])
  end
  local n = #admitted
  local fields = { 'next', 0, 'cursor', 0 }
  if n > 0 then
    redis.call('ZADD', passes, unpack(passArgs))
    if instance ~= '' then
      s.at = now
      fields[#fields + 1] = 'at'
      fields[#fields + 1] = now
    end
  end
  -- The line is empty when fewer than were due came out, or when the last ticket given did
  -- (everyone in line has a ticket above the cursor): no command is spent to count it.
  if n == 0 then
    s.next = now
  elseif n < due or s.cursor == s.seq then
    s.next = now + interval
  else
    s.next = s.next + n * interval
  end
  if n > 0 and now >= s.trim then
    -- Expired passes go once per `every` ms (`hasPass` reads the expiry); the key lives until
    -- the last pass given before the next trim expires, then goes whole. `open` sets 'trim' to
    -- 0: a longer passTtl extends it at the next admission.
    local every = math.min(MAX_TRIM_EVERY, s.passTtl)
    redis.call('ZREMRANGEBYSCORE', passes, '-inf', now)
    local keep = s.passTtl + every
    if redis.call('PTTL', passes) < keep then redis.call('PEXPIRE', passes, keep) end
    s.trim = now + every
    fields[#fields + 1] = 'trim'
    fields[#fields + 1] = s.trim
  end
  fields[2], fields[4] = fmt(s.next), s.cursor
  redis.call('HSET', room, unpack(fields))
  if n > 0 then publish(s, admitted, instance) end
end
