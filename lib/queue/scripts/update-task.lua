-- Changes what is stored about a leased task, from its handler, if the lease token is still
-- current: `task.progress(value)` (stored, and a `progress` event) or `task.update(payload)`.
-- After the handler gave its task back with `task.delay()` (ARGV[6] = '1'), the change applies
-- while nobody holds the task and it still waits where claim.lua's requeue put it (`due`, a
-- priority task's `pending` or `prio`, a grouped task's place in `gtasks`): the step-job pattern
-- `task.delay(ms)`, then `task.update({ step })`, written in BullMQ's order.
--
-- KEYS[1] tokens    hash: id -> lease token of the current lease
-- KEYS[2] progress  hash: id -> JSON of the last progress value
-- KEYS[3] payload   hash: id -> JSON payload
-- KEYS[4] events    stream: the queue's events (includes/events.lua)
-- KEYS[5] due       zset: id -> due time (plain tasks, ready or delayed)
-- KEYS[6] pending   zset: id -> due time (delayed tasks with a priority or a group)
-- KEYS[7] info      hash: id -> 'enqueuedAt' or 'enqueuedAt|dueAt|priority|seq|group'
-- KEYS[8] prio      zset: id -> (priority + 1000) * 2^41 + seq (ready tasks with a priority)
-- KEYS[9] gtasks    zset (all scores 0): group \0 seq(15 digits) \0 id (grouped tasks)
-- ARGV[1] what      'progress' or 'payload'
-- ARGV[2] id
-- ARGV[3] token     the lease token of the caller
-- ARGV[4] value     JSON text
-- ARGV[5] eventsMaxLen
-- ARGV[6] '1' when the caller's handler gave the task back with `task.delay()`, else '0'
--
-- Returns 1, or 0 when the token is stale (nothing changes).

-- Whether task `id`, leased by nobody, still waits to be claimed: a claim or a finish takes it
-- out of each of these keys. Only a task given back with `task.delay()` gets here (a rare path).
local function waits(id)
  if redis.call('ZSCORE', KEYS[5], id) or redis.call('ZSCORE', KEYS[6], id) then return true end
  local info = redis.call('HGET', KEYS[7], id)
  local seq, group = string.match(info or '', '^%d+|%d+|%-?%d+|(%d+)|(.*)$')
  if not seq then return false end
  -- A priority task given back due at once (`task.delay(0)`) waits in prio.
  if group == '' then return redis.call('ZSCORE', KEYS[8], id) ~= false end
  -- A grouped task given back waits at the head of its group (its group parked until it is due):
  -- its member is task-info.lua's groupMember(group, seq, id).
  local member = group .. '\0' .. string.format('%015.0f', tonumber(seq)) .. '\0' .. id
  return redis.call('ZSCORE', KEYS[9], member) ~= false
end

local id = ARGV[2]
local holder = redis.call('HGET', KEYS[1], id)
if holder ~= ARGV[3] then
  if ARGV[6] ~= '1' or holder or not waits(id) then return 0 end
end
if ARGV[1] == 'progress' then
  redis.call('HSET', KEYS[2], id, ARGV[4])
  emit(KEYS[4], tonumber(ARGV[5]), 'progress', id, 'p', ARGV[4])
else
  redis.call('HSET', KEYS[3], id, ARGV[4])
end
return 1
