-- Takes up to `count` ready tasks without priority or group (due <= now), lowest due time first, and removes them with
-- their payload: at-most-once delivery.
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
--                    popped task's entry goes (it ended)
-- ARGV[1] count
-- ARGV[2] eventsMaxLen
--
-- Flows (docs/queue.md, "Flows"): a popped flow child counts as **completed**, without a result,
-- for its parent (told through the outbox, as remove.lua does). pop hands the task to its caller,
-- who processes it: at-most-once delivery treats the hand-over as the task's end (its payload goes
-- now, as at an ack), so the parent runs once its last child was taken. Counting it as failed
-- (removed) would make a parent die, with the default 'fail-parent', because its child was
-- delivered; pop could not be used on a flow's queue at all.
--
-- Returns {id_1, score_1, payload_1, ..., id_n, score_n, payload_n}; a payload is false when the
-- task has none. When an outcome was pushed to the outbox, one more element (1) follows: the
-- store then applies the outbox.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local maxLen = tonumber(ARGV[2])
local ready = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local result = {}
-- One EXISTS for the keys a plain queue does not use (logs, kept calls, flows, deadlines).
local hasExtra = #ready > 0
  and redis.call('EXISTS', KEYS[8], KEYS[9], KEYS[10], KEYS[12], KEYS[13]) > 0
local pushed = false
for i = 1, #ready, 2 do
  local id = ready[i]
  redis.call('ZREM', KEYS[1], id)
  result[#result + 1] = id
  result[#result + 1] = ready[i + 1]
  result[#result + 1] = redis.call('HGET', KEYS[2], id)
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  redis.call('HDEL', KEYS[4], id)
  redis.call('HDEL', KEYS[5], id)
  redis.call('HDEL', KEYS[6], id)
  if hasExtra then
    redis.call('HDEL', KEYS[8], id)
    redis.call('HDEL', KEYS[9], id)
    redis.call('HDEL', KEYS[12], id)
    redis.call('ZREM', KEYS[13], id)
    if childEnded(KEYS[10], KEYS[11], nil, id, 'c', '', now, maxLen) then pushed = true end
  end
  emit(KEYS[7], maxLen, 'removed', id)
end
if pushed then result[#result + 1] = 1 end
return result
