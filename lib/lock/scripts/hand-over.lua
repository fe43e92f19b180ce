-- A lock's holder and its line (entries "deadlineMs:ttlMs:fencing:mode"): shared by the lock
-- scripts that mark the holder or hand the lock over (put before each when it is loaded, after
-- fence-counter.lua and lib/waiting/scripts/line.lua; lock-scripts.ts).

-- Marks `v`, the value of lock `value` (its holder's token, or nil when free), with '*': the
-- holder's release then hands the lock over or wakes the line.
local function markWaited(value, v)
  if v and string.sub(v, -1) ~= '*' then redis.call('SET', value, v .. '*', 'KEEPTTL') end
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
