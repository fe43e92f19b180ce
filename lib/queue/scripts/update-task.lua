-- Changes what is stored about a leased task, from its handler, if the lease token is still
-- current: `task.progress(value)` (stored, and a `progress` event) or `task.update(payload)`.
--
-- KEYS[1] tokens    hash: id -> lease token of the current lease
-- KEYS[2] progress  hash: id -> JSON of the last progress value
-- KEYS[3] payload   hash: id -> JSON payload
-- KEYS[4] events    stream: the queue's events (includes/events.lua)
-- ARGV[1] what      'progress' or 'payload'
-- ARGV[2] id
-- ARGV[3] token     the lease token of the caller
-- ARGV[4] value     JSON text
-- ARGV[5] eventsMaxLen
--
-- Returns 1, or 0 when the token is stale (nothing changes).

local id = ARGV[2]
if redis.call('HGET', KEYS[1], id) ~= ARGV[3] then return 0 end
if ARGV[1] == 'progress' then
  redis.call('HSET', KEYS[2], id, ARGV[4])
  emit(KEYS[4], tonumber(ARGV[5]), 'progress', id, 'p', ARGV[4])
else
  redis.call('HSET', KEYS[3], id, ARGV[4])
end
return 1
