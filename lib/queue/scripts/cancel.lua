-- Cancels a task: a queued (ready or delayed) one ends `cancelled` at once; for a leased one the
-- cancel is recorded for its worker (told by pub/sub, and by its next lease extension), which
-- ends it `cancelled` when its handler stops.
--
-- KEYS[1]  due       zset: id -> due time (ms) of tasks without priority or group
-- KEYS[2]  leased    zset: id -> lease expiry (ms)
-- KEYS[3]  payload   hash: id -> JSON payload
-- KEYS[4]  attempts  hash: id -> claims so far
-- KEYS[5]  dead      zset: id -> time of death (ms)
-- KEYS[6]  info      hash: id -> 'enqueuedAt' or 'enqueuedAt|dueAt|priority|seq|group'
-- KEYS[7]  errors    hash: id -> last error
-- KEYS[8]  pending   zset: id -> due time of delayed tasks with a priority or a group
-- KEYS[9]  prio      zset: ready tasks with a priority
-- KEYS[10] gtasks    zset (all scores 0): group \0 seq(15 digits) \0 id
-- KEYS[11] done      zset: id -> end of its keepCompleted window
-- KEYS[12] cancelled zset: id -> time it was cancelled
-- KEYS[13] results   hash: id -> 'finishedAt|result JSON'
-- KEYS[14] progress  hash: id -> JSON of the last progress value
-- KEYS[15] opts      hash: id -> JSON of the task's own options
-- KEYS[16] cancels   hash: id -> reason, for leased tasks a cancel was asked for
-- KEYS[17] events    stream: the queue's events (includes/events.lua)
-- KEYS[18] channel   pub/sub channel of the queue's cancels (its workers listen): messages are
--                    '<ARGV[2]>\n<id>'
-- KEYS[19] logs      hash: id -> the task's log lines (task.log)
-- KEYS[20] dnext     hash: id -> the call it kept with keepLastIfActive (dropped with it)
-- KEYS[21] wchildren zset: parent id -> children still to finish (includes/flow.lua)
-- KEYS[22] cdone     hash: outcomes of the children of waiting parents
-- KEYS[23] flow      hash: parent id -> its children and their outcomes
-- KEYS[24] parents   hash: child id -> link to its flow parent
-- KEYS[25] outbox    list: child outcomes for their parents (the store applies them)
-- KEYS[26] expired   zset: id -> time it expired
-- KEYS[27] expiries  zset: id -> deadline of tasks enqueued with one (includes/expiry.lua): a
--                    cancelled waiting task's entry goes (it will not wait again)
-- ARGV[1] id
-- ARGV[2] reason     error JSON {name, message, reason?} (reason: what cancel() was given)
-- ARGV[3] eventsMaxLen
-- ARGV[4] keepMs     cancelled tasks older than this are deleted (keepDead)
-- ARGV[5] keepCount  at most this many cancelled tasks are kept
-- ARGV[6] sharded    '1': publish with SPUBLISH (Cluster), else PUBLISH
--
-- A parent waiting for its children is cancelled too (the store then cancels its unfinished
-- children); a cancelled child's parent is told through the outbox. A cancelled child under
-- 'wait' keeps its link to its parent while it is kept; the keepDead trim deletes it with the
-- task's other data.
--
-- Returns 'cancelled', 'signalled' (leased: its worker was told), 'finished' (completed, dead,
-- cancelled or expired already) or 'not-found'.

local id = ARGV[1]
if redis.call('ZSCORE', KEYS[2], id) then
  redis.call('HSET', KEYS[16], id, ARGV[2])
  redis.call(ARGV[6] == '1' and 'SPUBLISH' or 'PUBLISH', KEYS[18], ARGV[2] .. '\n' .. id)
  return 'signalled'
end
if redis.call('ZSCORE', KEYS[5], id) or redis.call('ZSCORE', KEYS[11], id)
    or redis.call('ZSCORE', KEYS[12], id) or redis.call('ZSCORE', KEYS[26], id) then
  return 'finished'
end
local found = redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[8], id)
  + redis.call('ZREM', KEYS[9], id)
local m = parseInfo(redis.call('HGET', KEYS[6], id))
if m and m.group ~= '' then
  found = found + redis.call('ZREM', KEYS[10], groupMember(m.group, m.seq, id))
end
local P = {wchildren = KEYS[21], cdone = KEYS[22], flow = KEYS[23]}
if redis.call('ZSCORE', KEYS[21], id) then
  closeParent(P, id)
  found = found + 1
end
if found == 0 then return 'not-found' end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
childEnded(KEYS[24], KEYS[25], nil, id, 'f', ARGV[2], now, tonumber(ARGV[3]))
redis.call('HSET', KEYS[7], id, ARGV[2])
redis.call('ZADD', KEYS[12], now, id)
redis.call('ZREM', KEYS[27], id)
emit(KEYS[17], tonumber(ARGV[3]), 'cancelled', id, 'e', ARGV[2])
redis.call('HDEL', KEYS[20], id)
-- The trimmed tasks' data, their flow links with it (this task's parent was told above).
forgetAll({KEYS[3], KEYS[4], KEYS[6], KEYS[7], KEYS[13], KEYS[14], KEYS[15], KEYS[19], KEYS[23],
  KEYS[24]}, trimFinished(KEYS[12], now - tonumber(ARGV[4]), tonumber(ARGV[5])))
return 'cancelled'
