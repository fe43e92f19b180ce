-- The queue's event stream (docs/queue-events.md): one entry per change, written by the script
-- that makes the change, so there is an event for every change and none for a change that did
-- not happen. Put before the scripts that change tasks (queue-scripts.ts).
--
-- Entry fields: t type, i task id, a attempt, r result (JSON), e error (JSON {name, message,
-- stack?} or plain text), p progress (JSON), d delay (ms). Capped with MAXLEN ~ (approximate: a
-- whole radix node at a time, so the trim costs O(1) per entry), by the first event of each script
-- call and every 100th after it.

-- Events this script call wrote, per stream: the first and every 100th trim that stream (MAXLEN
-- ~), the others only append, so that a batch of events does not pay the trim's arguments on
-- each. A stream stays within maxLen plus one radix node (~100 entries, what `~` allows) plus 100.
local emitted = {}
local TRIM_EVERY = 100

-- Appends one event for task `id` (nil: a queue event) to stream `key`, unless `maxLen` is 0
-- (events off); `...` are extra field/value pairs.
local function emit(key, maxLen, type, id, ...)
  if maxLen <= 0 then return end
  local n = emitted[key] or 0
  local trim = n % TRIM_EVERY == 0
  emitted[key] = n + 1
  if not trim then
    if id then
      redis.call('XADD', key, '*', 't', type, 'i', id, ...)
    else
      redis.call('XADD', key, '*', 't', type)
    end
    return
  end
  if id then
    redis.call('XADD', key, 'MAXLEN', '~', string.format('%d', maxLen), '*', 't', type, 'i', id, ...)
  else
    redis.call('XADD', key, 'MAXLEN', '~', string.format('%d', maxLen), '*', 't', type)
  end
end
