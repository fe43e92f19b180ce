-- Expiring tasks (`expiresAt` / `expiresInMs`): a task not started by its deadline never runs and
-- ends `expired`. Shared by the scripts that add tasks and the one that leases them (put after
-- task-info.lua; queue-scripts.ts).
--
-- The deadline is "x" in the task's own options (JSON in the opts hash): what decides. The
-- queue's expiries zset (id -> deadline) only says where to look for waiting tasks whose deadline
-- passed; an entry of a task that started, finished or was replaced is dropped when found.

-- The deadline (epoch ms) in a task's own options JSON, or nil when it has none.
local function expiryOf(opts)
  local x = opts and string.match(opts, '"x":(%d+)')
  return x and tonumber(x)
end

-- Takes task `id` out of wherever it waits (W: {due, pending, prio, gtasks}, info: its info
-- value); true when it was waiting there (not leased, finished or waiting for its children).
local function unqueue(W, id, info)
  local found = redis.call('ZREM', W.due, id) + redis.call('ZREM', W.pending, id)
    + redis.call('ZREM', W.prio, id)
  local m = parseInfo(info)
  if m and m.group ~= '' then
    found = found + redis.call('ZREM', W.gtasks, groupMember(m.group, m.seq, id))
  end
  return found > 0
end
