-- Compare-and-remove: removes a queued (not leased) task only if its due time is still `score`,
-- i.e. nobody re-enqueued (replaced) it since the caller read it.
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
-- ARGV[1] id
-- ARGV[2] score     the due time the caller saw
-- ARGV[3] eventsMaxLen
--
-- Returns 1 when removed, 0 when the task is absent or has another score.

local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
redis.call('HDEL', KEYS[6], ARGV[1])
redis.call('HDEL', KEYS[8], ARGV[1])
redis.call('HDEL', KEYS[9], ARGV[1])
emit(KEYS[7], tonumber(ARGV[3]), 'removed', ARGV[1])
return 1
