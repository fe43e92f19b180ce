-- The queue's event stream (docs/queue-events.md): one entry per change, written by the script
-- that makes the change, so there is an event for every change and none for a change that did
-- not happen. Put before the scripts that change tasks (queue-scripts.ts).
--
-- Entry fields: t type, i task id, a attempt, r result (JSON), e error (JSON {name, message,
-- stack?} or plain text), p progress (JSON), d delay (ms). Capped with MAXLEN ~ (approximate: a
-- whole radix node at a time, so the trim costs O(1) per entry).

-- Appends one event for task `id` (nil: a queue event) to stream `key`, unless `maxLen` is 0
-- (events off); `...` are extra field/value pairs.
local function emit(key, maxLen, type, id, ...)
  if maxLen <= 0 then return end
  if id then
    redis.call('XADD', key, 'MAXLEN', '~', maxLen, '*', 't', type, 'i', id, ...)
  else
    redis.call('XADD', key, 'MAXLEN', '~', maxLen, '*', 't', type)
  end
end
