-- Takes up to `count` ready tasks without priority or group (due <= now), lowest due time first, and removes them with
-- their payload: at-most-once delivery.
--
-- KEYS[1] due       zset: id -> due time (ms)
-- KEYS[2] payload   hash: id -> JSON payload
-- KEYS[3] attempts  hash: id -> claims so far
-- KEYS[4] info      hash: id -> enqueue time and options
-- KEYS[5] errors    hash: id -> last error message
-- KEYS[6] opts      hash: id -> JSON of the task's own options
-- KEYS[7] events    stream: the queue's events (includes/events.lua)
-- KEYS[8] logs      hash: id -> the task's log lines (task.log; a task given back after a lease)
-- KEYS[9] dnext     hash: id -> the call it kept with keepLastIfActive (dropped with it)
-- ARGV[1] count
-- ARGV[2] eventsMaxLen
--
-- Returns {id_1, score_1, payload_1, ..., id_n, score_n, payload_n}; a payload is false when the
-- task has none.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ready = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local result = {}
local hasLogs = #ready > 0 and redis.call('EXISTS', KEYS[8], KEYS[9]) > 0
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
  if hasLogs then
    redis.call('HDEL', KEYS[8], id)
    redis.call('HDEL', KEYS[9], id)
  end
  emit(KEYS[7], tonumber(ARGV[2]), 'removed', id)
end
return result
