-- Deletes a task that is not leased: queued (ready or delayed) or finished (completed, dead,
-- cancelled, expired), with its payload and everything stored about it.
--
-- KEYS[1]  due       zset: id -> due time (ms) of tasks without priority or group
-- KEYS[2]  leased    zset: id -> lease expiry (ms)
-- KEYS[3]  payload   hash: id -> JSON payload
-- KEYS[4]  attempts  hash: id -> claims so far
-- KEYS[5]  dead      zset: id -> time of death (ms)
-- KEYS[6]  info      hash: id -> 'enqueuedAt' or 'enqueuedAt|dueAt|priority|seq|group'
-- KEYS[7]  errors    hash: id -> last error message
-- KEYS[8]  pending   zset: id -> due time of delayed tasks with a priority or a group
-- KEYS[9]  prio      zset: ready tasks with a priority
-- KEYS[10] gtasks    zset (all scores 0): group \0 seq(15 digits) \0 id
-- KEYS[11] done      zset: id -> end of its keepCompleted window (ms)
-- KEYS[12] cancelled zset: id -> time it was cancelled
-- KEYS[13] results   hash: id -> 'finishedAt|result JSON'
-- KEYS[14] progress  hash: id -> JSON of the last progress value
-- KEYS[15] opts      hash: id -> JSON of the task's own options
-- KEYS[16] events    stream: the queue's events (includes/events.lua)
-- KEYS[17] logs      hash: id -> the task's log lines (task.log)
-- KEYS[18] dnext     hash: id -> the call it kept with keepLastIfActive (dropped with it)
-- KEYS[19] wchildren zset: parent id -> children still to finish (includes/flow.lua)
-- KEYS[20] cdone     hash: outcomes of the children of waiting parents
-- KEYS[21] flow      hash: parent id -> its children and their outcomes
-- KEYS[22] parents   hash: child id -> link to its flow parent
-- KEYS[23] outbox    list: child outcomes for their parents (the store applies them)
-- KEYS[24] expired   zset: id -> time it expired
-- KEYS[25] expiries  zset: id -> deadline of tasks enqueued with one (includes/expiry.lua)
-- ARGV[1] id
-- ARGV[2] eventsMaxLen
--
-- A parent waiting for its children can be removed (the store then cancels its unfinished
-- children); a removed child that had not finished counts as failed for its parent (told through
-- the outbox). The removed task's own link to its parent goes with it (a 'wait' child keeps it
-- until then), so does its deadline's entry.
--
-- Returns 1 when removed, 0 when the task is leased (a worker runs it) or unknown.

local id = ARGV[1]
if redis.call('ZSCORE', KEYS[2], id) then return 0 end
local found = redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[5], id)
  + redis.call('ZREM', KEYS[8], id) + redis.call('ZREM', KEYS[9], id)
  + redis.call('ZREM', KEYS[11], id) + redis.call('ZREM', KEYS[12], id)
  + redis.call('ZREM', KEYS[24], id)
local m = parseInfo(redis.call('HGET', KEYS[6], id))
if m and m.group ~= '' then
  found = found + redis.call('ZREM', KEYS[10], groupMember(m.group, m.seq, id))
end
if redis.call('ZSCORE', KEYS[19], id) then
  closeParent({wchildren = KEYS[19], cdone = KEYS[20], flow = KEYS[21]}, id)
  found = found + 1
end
if found == 0 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
childEnded(KEYS[22], KEYS[23], nil, id, 'f',
  cjson.encode({name = 'QueueError', message = 'removed'}), now, tonumber(ARGV[2]))
for _, i in ipairs({3, 4, 6, 7, 13, 14, 15, 17, 18, 21, 22}) do redis.call('HDEL', KEYS[i], id) end
redis.call('ZREM', KEYS[25], id)
emit(KEYS[16], tonumber(ARGV[2]), 'removed', id)
return 1
