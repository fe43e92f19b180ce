-- Shared part of the shared-mode scripts (acquire-shared.lua, release-shared.lua) and of
-- leave-line.lua, which any waiter may call (readers may stand behind it): put before
-- each when it is loaded (lock-scripts.ts, after the line's helpers and hand-over.lua), so every
-- script is one self-contained EVAL body.
--
-- KEYS[1] value, KEYS[2] fence, KEYS[3] line, KEYS[4] entries (as in acquire.lua),
-- KEYS[5] shared (zset: shared holder token -> expiry ms, Redis clock), KEYS[6] channel
-- While shared holders exist the value holds SHARED ('!shared', '!shared*' while someone waits),
-- PX the longest shared hold.

local SHARED = '!shared'
local value, fence, line, entries, shared, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local now = clock()

-- A shared grant does not increment the fence: it reports the latest exclusive grant's.
local function currentFence(fencing)
  if fencing ~= '1' then return 0 end
  return lastFence(fence)
end

-- Adds a shared holder (out of the line): the sentinel lives as long as the longest shared
-- holder, marked while someone waits (so the last shared release hands the lock over). The ZADD
-- comes first: under maxmemory, Redis refuses a script's writes for OOM only at its first
-- deny-oom command and only while it has written nothing (ZREM and HDEL are not deny-oom).
local function addReader(reader, readerTtl)
  redis.call('ZADD', shared, now + readerTtl, reader)
  redis.call('ZREM', line, reader)
  redis.call('HDEL', entries, reader)
  local keep = tonumber(redis.call('ZRANGE', shared, -1, -1, 'WITHSCORES')[2]) - now
  local marked = redis.call('EXISTS', line) == 1
  redis.call('SET', value, marked and SHARED .. '*' or SHARED, 'PX', keep)
  redis.call('PEXPIRE', shared, keep)
end

-- Grants the shared waiters at the head of the line, up to the first exclusive one, and tells
-- each on its waiter channel: 'h <token> <fence> <nowMs> <ttlMs> 0'.
local function serveReaders(publish)
  while true do
    local head, entry = liveHead(line, entries, now)
    if not head then return end
    local readerTtl, fencing, mode = string.match(entry, '^%d+:(%d+):(%d):(%a)$')
    if mode ~= 'r' then return end
    addReader(head, tonumber(readerTtl))
    redis.call(publish, waiterChannel(channel, head),
      string.format('h %s %.0f %.0f %s 0', head, currentFence(fencing), now, readerTtl))
  end
end

-- A waiter left the line (gave up) and the lock's value is `v`: serves whom that lets in now,
-- rather than leaving them to their next check (up to a renewal period, LINE_RENEW_MS, later).
-- A free lock (a release only woke the leaver, 'w', and it gave up instead of taking it) goes to
-- the line's first live waiter as release.lua would give it; a lock held shared lets in the shared
-- waiters now at the head (the leaver was the exclusive one they waited behind).
local function serveAfterLeaving(v, publish, fenceTtl)
  if not v then
    handOver(value, fence, line, entries, channel, publish, fenceTtl, now)
  elseif v == SHARED or v == SHARED .. '*' then
    serveReaders(publish)
  end
end
