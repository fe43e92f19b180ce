-- A lock's holder and its line (entries "deadlineMs:ttlMs:fencing:mode"): shared by the lock
-- scripts that hand the lock over or wake its line (put before each when it is loaded, after
-- fence-counter.lua, lib/waiting/scripts/line.lua and mark-waited.lua; lock-scripts.ts).

-- The channel on which the waiter `token` of lock channel `channel` is told it was handed the lock
-- or woken: `channel` followed by ':' and the token's first 8 characters, the tag of the instance
-- that made it (lib/lock/lock-tokens.ts, waiterChannel in lib/lock/lock-keys.ts). A message thus
-- reaches the one instance it is for, not every instance waiting for the lock (each delivery costs
-- the server a write to a subscriber's connection). Same Cluster slot as `channel`.
local function waiterChannel(channel, token)
  return channel .. ':' .. string.sub(token, 1, 8)
end

-- Gives the lock `value`, which its holder (or last shared holder) just left, to the first live
-- waiter: a fair one ('h' entry) owns it as soon as the script ends and is told on its waiter
-- channel with 'h <token> <fence> <nowMs> <ttlMs> <others>' (a new fence when its entry asks for
-- fencing; others = 1 when more waiters remain); a non-fair or shared one ('w', 'r' entry) is only
-- woken, with 'w <token>', to race for the free lock. Returns false when nobody live waits: the
-- caller frees the lock.
local function handOver(value, fence, line, entries, channel, publish, fenceTtl, now)
  local next, entry, more = liveHead(line, entries, now)
  if not next then return false end
  local ttl, fencing, mode = string.match(entry, '^%d+:(%d+):(%d):(%a)$')
  if mode ~= 'h' then
    redis.call('DEL', value)
    redis.call(publish, waiterChannel(channel, next), 'w ' .. next)
    return true
  end
  redis.call('ZREM', line, next)
  redis.call('HDEL', entries, next)
  redis.call('SET', value, more and next .. '*' or next, 'PX', ttl)
  -- `now` is clock()'s: the fence is seeded from the same reading of TIME, and the message's nowMs
  -- is that reading's microseconds without their last three digits. The message is joined from
  -- strings (the fence as nextFence made it): string.format, or a number in a concatenation, costs
  -- the server more than all of the joining.
  local micros = clockMicros()
  local f = fencing == '1' and nextFence(fence, fenceTtl, micros) or '0'
  redis.call(publish, waiterChannel(channel, next), 'h ' .. next .. ' ' .. f .. ' ' ..
    string.sub(micros, 1, -4) .. ' ' .. ttl .. ' ' .. (more and '1' or '0'))
  return true
end
