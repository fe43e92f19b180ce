-- A lock's line of waiting processes: shared by the lock scripts that read, join or renew it (put
-- before each when it is loaded, after fence-counter.lua; lock-scripts.ts).
--
-- line (zset: token -> arrival order), entries (hash: token -> "deadlineMs:ttlMs:fencing:mode").

-- Redis TIME in ms, read at most once per script and only when it is needed (clock()).
local clockMs = nil
local function clock()
  if not clockMs then
    local t = redis.call('TIME')
    clockMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return clockMs
end

-- Writes the entry of `token` ("ttlMs:fencing:mode" `spec`), live until `now` + `entryTtl` ms;
-- the line lives as long as someone renews it.
local function renewEntry(line, entries, token, spec, entryTtl, now)
  redis.call('HSET', entries, token, (now + entryTtl) .. ':' .. spec)
  redis.call('PEXPIRE', line, entryTtl * 2)
  redis.call('PEXPIRE', entries, entryTtl * 2)
end

-- Puts `token` at the end of `line` with its entry (see renewEntry). Score = last score + 1:
-- strict arrival order, independent of clocks; NX keeps the place of a waiter only checking again.
local function joinLine(line, entries, token, spec, entryTtl, now)
  local last = redis.call('ZRANGE', line, -1, -1, 'WITHSCORES')[2]
  redis.call('ZADD', line, 'NX', (tonumber(last) or 0) + 1, token)
  renewEntry(line, entries, token, spec, entryTtl, now)
end

-- Marks `v`, the value of lock `value` (its holder's token, or nil when free), with '*': the
-- holder's release then hands the lock over or wakes the line.
local function markWaited(value, v)
  if v and string.sub(v, -1) ~= '*' then redis.call('SET', value, v .. '*', 'KEEPTTL') end
end

-- The first waiter in `line` whose entry is still live at `now` (ms), and its entry; entries of
-- waiters that stopped renewing (crashed, frozen, gave up) are dropped on the way, not waited for.
-- nil when nobody live waits.
local function liveHead(line, entries, now)
  while true do
    local head = redis.call('ZRANGE', line, 0, 0)[1]
    if not head then return nil, nil end
    local entry = redis.call('HGET', entries, head)
    if entry and tonumber(string.match(entry, '^%d+')) >= now then return head, entry end
    redis.call('ZREM', line, head)
    redis.call('HDEL', entries, head)
  end
end

-- Gives the lock `value`, which its holder (or last shared holder) just left, to the first live
-- waiter: a fair one ('h' entry) owns it as soon as the script ends and is told on `channel` with
-- 'h <token> <fence> <nowMs> <ttlMs> <others>' (a new fence when its entry asks for fencing;
-- others = 1 when more waiters remain); a non-fair or shared one ('w', 'r' entry) is only woken,
-- with 'w <token>', to race for the free lock. Returns false when nobody live waits: the caller
-- frees the lock.
local function handOver(value, fence, line, entries, channel, publish, fenceTtl, now)
  local next, entry = liveHead(line, entries, now)
  if not next then return false end
  local ttl, fencing, mode = string.match(entry, '^%d+:(%d+):(%d):(%a)$')
  if mode ~= 'h' then
    redis.call('DEL', value)
    redis.call(publish, channel, 'w ' .. next)
    return true
  end
  redis.call('ZREM', line, next)
  redis.call('HDEL', entries, next)
  local others = redis.call('EXISTS', line)
  redis.call('SET', value, others == 1 and next .. '*' or next, 'PX', ttl)
  local f = fencing == '1' and nextFence(fence, fenceTtl) or 0
  -- %.0f: a fence is a 16-digit number, which plain concatenation would round.
  redis.call(publish, channel, string.format('h %s %.0f %.0f %s %d', next, f, now, ttl, others))
  return true
end
