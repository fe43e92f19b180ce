-- Changes a queue-wide setting shared by every instance, and wakes an idle worker so that it
-- sees the change at once.
--
-- KEYS[1] config  hash: 'paused' -> '1', 'concurrency' -> global limit of leased tasks,
--                 'maxSize' -> bound of tasks queued and running (enqueue.lua),
--                 'limitedUntil' -> ms (Redis clock) before which no task is taken (claim.lua),
--                 'limiter' -> 'max:durationMs', the queue limiter of every worker (claim.lua)
-- KEYS[2] wake    list: wake-up marker for idle workers (at most one element)
-- KEYS[3] events  stream: the queue's events (includes/events.lua)
-- ARGV[1] field   'paused', 'concurrency', 'maxSize', 'limitedUntil' or 'limiter'
-- ARGV[2] value   the new value; '' deletes the field (resume, no global limit); for
--                 'limitedUntil', ms from now (Redis TIME): a later time already set is kept, as
--                 claim.lua keeps it for a handler's QueueRateLimitError
-- ARGV[3] eventsMaxLen
--
-- Returns 1.

local value = ARGV[2]
if ARGV[1] == 'limitedUntil' and value ~= '' then
  local t = redis.call('TIME')
  local untilMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(value)
  local current = tonumber(redis.call('HGET', KEYS[1], 'limitedUntil'))
  if current and current > untilMs then untilMs = current end
  value = string.format('%d', untilMs)
end
local changed
if value == '' then
  changed = redis.call('HDEL', KEYS[1], ARGV[1]) == 1
else
  changed = redis.call('HGET', KEYS[1], ARGV[1]) ~= value
  redis.call('HSET', KEYS[1], ARGV[1], value)
end
if changed and ARGV[1] == 'paused' then
  emit(KEYS[3], tonumber(ARGV[3]), ARGV[2] == '' and 'resumed' or 'paused')
end
redis.call('LPUSH', KEYS[2], '1')
redis.call('LTRIM', KEYS[2], 0, 0)
return 1
