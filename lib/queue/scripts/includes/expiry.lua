-- Expiring tasks (`expiresAt` / `expiresInMs`): a task not started by its deadline never runs and
-- ends `expired`. Shared by the scripts that add tasks and the one that leases them (put after
-- task-info.lua; queue-scripts.ts).
--
-- The deadline is "x" in the task's own options (JSON in the opts hash): what decides. The
-- queue's expiries zset (id -> deadline) only says where to look for waiting tasks whose deadline
-- passed. A task keeps its entry while it can still wait: queued, leased (a retry, task.delay or
-- a stalled lease returned puts it back; claim.lua writes the entry again then, as a sweep made
-- while the task was leased dropped it), given back. The scripts that end a task for good drop
-- it at once, so the set holds no finished tasks until their deadlines (which may be years
-- away): claim.lua at an ack (one ZREM per call, only when the set exists), a death or a cancel
-- of a leased task, and an expiry; cancel.lua, remove.lua, drain.lua, pop.lua and dequeue.lua
-- (the last two only when the queue has a key a plain queue lacks: one EXISTS they pay anyway).
-- An entry left behind otherwise (a task ended expired as a claim was about to lease it: its
-- deadline passed already) goes when the sweep reaches it and does not find its task waiting. A
-- dead task moved back by requeue-dead.lua waits again: that script indexes its deadline again.

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
