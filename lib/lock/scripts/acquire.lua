-- Acquires one or more locks for one token, all or nothing.
--
-- KEYS, 2 per lock:  value (string: holder token, PX ttl; a trailing '*' marks "someone waits"),
--                    fence (counter, PX fenceTtl)
-- and, per lock, two keys named after its value key (lock-keys.lua; same hash tag, so same
-- Cluster slot): <value>:line (zset: waiting tokens in arrival order) and
-- <value>:entries (hash: token -> entry). They are not passed in KEYS: each key passed costs the
-- server ~1,400 instructions on the hot path (bench/README.md, "Where the script time goes").
-- ARGV[1] token        fresh random value of this acquisition (a cohort's line token when joining)
-- ARGV[2] ttl          lock TTL in ms
-- ARGV[3] flags        4 characters (one argument: each costs on the hot path):
--                      1. fencing: '1' increments the fence counter of each lock and returns it
--                      2. respectLine: '1' a free lock whose line has a live waiter is not free
--                         for this token
--                      3. wait: what a caller that is not granted does: '1' waits in line (one
--                         lock: joins the line or keeps this token's place), 'm' waits outside any
--                         line (marks the blocking lock so that its release announces itself),
--                         '0' does not wait ('0' and 'm' promise the token never joined a line)
--                      4. mode: 'h' hand me the lock on release (fair), 'w' only wake me
-- ARGV[4] fenceTtl     ms a newly created fence counter lives (fence-counter.lua)
-- ARGV[5] entryTtl     with wait '1' only: ms a line entry stays live without being renewed
--                      (renew.lua)
--
-- Returns {1, others, fence_1, ..., fence_n} when granted: others = 1 when other waiters are in
--         the line of the (single) lock, fence 0 when fencing is off; one lock found already
--         this token's (handed over while it waited, or the same call run again) adds its PTTL:
--         {1, others, fence, pttl};
--         {0, nowMs, wait, line} when not (nowMs 0 on the fast path, which dates nothing): wait =
--         holder's PTTL, -1 for a holder without TTL,
--         -2 when the lock is free but another waiter is first in line (a held lock gives its
--         PTTL whether or not others are ahead); line = entries in the
--         blocking lock's line (processes waiting, an estimate's input).
-- An entry is "deadlineMs:ttlMs:fencing:mode" so that release.lua can hand the lock over directly.
-- The fast path (one free lock, nobody in line) is 4 commands: EXISTS line, SET NX, and the next
-- fence (nextFence: TIME, SET). It is acquire-fast.lua, which comes before this file's helpers
-- (lock-scripts.ts: lock-keys.lua, fence-counter.lua, acquire-fast.lua, line.lua, mark-waited.lua,
-- this file) so that a call it answers does not set them up; it also defines `token` and
-- `flags`, used here. The contended path (one lock held by another, a caller that joins its line:
-- every waiter's call on a busy lock) comes first in this file, before its own helpers.
-- A lock whose value is this call's token is granted, with the fence it has: ioredis sends a
-- command again when its connection closed before the reply, and after a failover the promoted
-- replica may have run the first call already. The token is fresh for every acquisition (or a
-- line token release.lua handed the lock to), so nobody else's call can find it there.

local fencingFlag, respectFlag, waitFlag, mode = string.match(flags, '^(.)(.)(.)(.)$')
local marked = token .. '*'

-- The contended case first, before the helpers below are set up (each costs the server on every
-- call): one lock held by another, and a caller that waits in line, as every waiter's call on a
-- busy lock is. It joins the line (or keeps its place there) as blocked() below does: the same
-- lines on purpose, as acquire-fast.lua repeats the grant (one helper shared by the two, created on
-- every call, measured +2.5 k instructions a join, 2 %). `held`: the lock's value, for the rest of
-- the script.
local held = nil
if #KEYS == 2 then
  held = redis.call('GET', KEYS[1])
  if held and held ~= token and held ~= marked and waitFlag == '1' then
    local line = KEYS[1] .. LINE
    local pttl = redis.call('PTTL', KEYS[1])
    joinLine(line, KEYS[1] .. ENTRIES, token, ARGV[2] .. ':' .. fencingFlag .. ':' .. mode,
      tonumber(ARGV[5]), clock())
    markWaited(KEYS[1], held)
    return {0, clock(), pttl, redis.call('ZCARD', line)}
  end
end

local fencing = fencingFlag == '1'
local respectLine = respectFlag == '1'
local join = waitFlag == '1' and #KEYS == 2
local wait = waitFlag ~= '0'
local fenceTtl = ARGV[4]
local entryTtl = tonumber(ARGV[5])
local n = #KEYS / 2

local function fenceOf(fence)
  return fencing and nextFence(fence, fenceTtl) or 0
end

local function leave(line, entries)
  redis.call('ZREM', line, token)
  redis.call('HDEL', entries, token)
end

-- Not granted: wait behind the holder (or the line's head). `v`: the lock's value (nil: free).
local function blocked(i, waitMs, v)
  local value = KEYS[i * 2 + 1]
  local line, entries = value .. LINE, value .. ENTRIES
  if wait then
    if join then
      joinLine(line, entries, token, ARGV[2] .. ':' .. fencingFlag .. ':' .. mode, entryTtl, clock())
    end
    markWaited(value, v)
  end
  return {0, clock(), waitMs, redis.call('ZCARD', line)}
end

if n == 1 then
  local value, fence = KEYS[1], KEYS[2]
  local line, entries = value .. LINE, value .. ENTRIES
  local v = held
  if v then
    -- Already ours: release.lua handed it to this token while it waited in line, or the same
    -- call ran before. With the PTTL: a handoff may have set the TTL long before this call (a
    -- check after a lost message), and the holder must not count its life from now.
    if v == token or v == marked then
      if join then leave(line, entries) end
      return {1, v == marked and 1 or 0, fencing and lastFence(fence) or 0,
        redis.call('PTTL', value)}
    end
    -- Held: wait behind the holder, whoever is first in line (nothing in the line to read).
    return blocked(0, redis.call('PTTL', value), v)
  end
  local inLine = redis.call('EXISTS', line) == 1
  if inLine and respectLine then
    local head = liveHead(line, entries, clock())
    -- Free, but another waiter is first: -2 (the PTTL of a missing key).
    if head and head ~= token then return blocked(0, -2, nil) end
  end
  -- Free (this script read it so, and nothing ran since): SET NX cannot be refused.
  redis.call('SET', value, token, 'NX', 'PX', ARGV[2])
  local others = 0
  if inLine then
    leave(line, entries)
    if redis.call('EXISTS', line) == 1 then
      others = 1
      redis.call('SET', value, marked, 'KEEPTTL')
    end
  end
  return {1, others, fenceOf(fence)}
end

for i = 0, n - 1 do
  local value = KEYS[i * 2 + 1]
  local line, entries = value .. LINE, value .. ENTRIES
  local pttl = redis.call('PTTL', value)
  if pttl ~= -2 then
    local v = redis.call('GET', value)
    -- The first held by this token: the same call ran before (all or nothing: all are ours).
    if i == 0 and (v == token or v == marked) then
      local result = {1, 0}
      for j = 0, n - 1 do
        result[j + 3] = fencing and lastFence(KEYS[j * 2 + 2]) or 0
      end
      return result
    end
    return blocked(i, pttl, wait and v or nil)
  end
  if respectLine and redis.call('EXISTS', line) == 1 then
    local head = liveHead(line, entries, clock())
    if head and head ~= token then return blocked(i, -2, nil) end
  end
end
local result = {1, 0}
for i = 0, n - 1 do
  local value = KEYS[i * 2 + 1]
  local v = token
  if redis.call('EXISTS', value .. LINE) == 1 then v = marked end
  redis.call('SET', value, v, 'PX', ARGV[2])
  result[i + 3] = fenceOf(KEYS[i * 2 + 2])
end
return result
