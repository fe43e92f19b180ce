-- A task's info, and where a grouped or prioritized task waits: shared by the queue scripts that
-- read them (put before each when it is loaded; queue-scripts.ts).
--
-- info (hash: id -> value): 'enqueuedAt' for a plain task, 'enqueuedAt|dueAt|priority|seq|group'
-- for one with a priority or a group (seq: the queue's enqueue sequence; FIFO within a priority
-- and within a group).

-- 2^41: sequence numbers stay below it, so a priority score orders by priority, then by seq.
local PRIO_BASE = 2199023255552

-- An info value -> {enq (string), due, prio, seq, group}; nil for a plain task or no value.
local function parseInfo(v)
  if not v then return nil end
  local e, d, p, s, g = string.match(v, '^(%d+)|(%d+)|(-?%d+)|(%d+)|(.*)$')
  if not e then return nil end
  return {enq = e, due = tonumber(d), prio = tonumber(p), seq = tonumber(s), group = g}
end

-- A grouped task's member of gtasks: group \0 seq (15 digits) \0 id, so lexical order is FIFO.
local function groupMember(group, seq, id)
  return group .. '\0' .. string.format('%015.0f', seq) .. '\0' .. id
end

-- A ready task's score in prio: lower priorities first, then enqueue order.
local function prioScore(prio, seq)
  return string.format('%d', (prio + 1000) * PRIO_BASE + seq)
end

-- Puts `group` at the end of the round-robin `ring` (unless it is in it already).
local function joinRing(ring, group)
  local last = redis.call('ZRANGE', ring, -1, -1, 'WITHSCORES')[2]
  redis.call('ZADD', ring, 'NX', (tonumber(last) or 0) + 1, group)
end
