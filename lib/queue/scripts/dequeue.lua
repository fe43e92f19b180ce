-- Compare-and-remove: removes a queued (not leased) task only if its due time is still `score`,
-- i.e. nobody re-enqueued (replaced) it since the caller read it.
--
-- KEYS[1]  due       zset: id -> due time (ms)
-- KEYS[2]  payload   hash: id -> JSON payload
-- KEYS[3]  attempts  hash: id -> claims so far
-- KEYS[4]  info      hash: id -> enqueue time and options
-- KEYS[5]  errors    hash: id -> last error message
-- KEYS[6]  opts      hash: id -> JSON of the task's own options
-- KEYS[7]  events    stream: the queue's events (includes/events.lua)
-- KEYS[8]  logs      hash: id -> the task's log lines (task.log; a task given back after a lease)
-- KEYS[9]  dnext     hash: id -> the call it kept with keepLastIfActive (dropped with it)
-- KEYS[10] parents   hash: child id -> link to its flow parent (includes/flow.lua)
-- KEYS[11] outbox    list: child outcomes for their parents (the store applies them)
-- KEYS[12] flow      hash: parent id -> its children and their outcomes (a ready parent's, dropped
--                    with it)
-- KEYS[13] expiries  zset: id -> deadline of tasks enqueued with one (includes/expiry.lua): a
--                    dequeued task's entry goes (it ended)
-- ARGV[1] id
-- ARGV[2] score     the due time the caller saw
-- ARGV[3] eventsMaxLen
--
-- Flows: as with pop.lua (see there for why), a dequeued flow child counts as completed, without
-- a result, for its parent: dequeue hands the task to its caller (top, then dequeue, then handle).
--
-- Returns 1 when removed, 2 when removed and an outcome was pushed to the outbox (the store then
-- applies it), 0 when the task is absent or has another score.

local id = ARGV[1]
local score = redis.call('ZSCORE', KEYS[1], id)
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[2], id)
redis.call('HDEL', KEYS[3], id)
redis.call('HDEL', KEYS[4], id)
redis.call('HDEL', KEYS[5], id)
redis.call('HDEL', KEYS[6], id)
redis.call('HDEL', KEYS[8], id)
redis.call('HDEL', KEYS[9], id)
local pushed = false
-- One EXISTS for a task that is not part of a flow and has no deadline (its queue has no flow
-- links, no flow records and no deadlines).
if redis.call('EXISTS', KEYS[10], KEYS[12], KEYS[13]) > 0 then
  redis.call('HDEL', KEYS[12], id)
  redis.call('ZREM', KEYS[13], id)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  pushed = childEnded(KEYS[10], KEYS[11], nil, id, 'c', '', now, tonumber(ARGV[3]))
end
emit(KEYS[7], tonumber(ARGV[3]), 'removed', id)
return pushed and 2 or 1
