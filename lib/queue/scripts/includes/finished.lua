-- Finished tasks (completed, dead, cancelled) and their bounds: shared by the scripts that finish
-- or delete tasks (queue-scripts.ts).

-- Variadic commands and reads take many ids per call, in chunks: unpack has a limit.
local CHUNK = 1000
local function variadic(command, key, items)
  for i = 1, #items, CHUNK do
    redis.call(command, key, unpack(items, i, math.min(i + CHUNK - 1, #items)))
  end
end

-- Deletes everything stored about `ids` in `hashes` (payload, attempts, info, errors, results,
-- progress, options): one HDEL per hash for the whole list. For 3 ids or more, a hash that does
-- not exist (no task of the queue has a log, progress, options...) is skipped after one EXISTS:
-- handing Redis the ids costs more than asking.
local function forgetAll(hashes, ids)
  if #ids == 0 then return end
  for _, h in ipairs(hashes) do
    if #ids < 3 or redis.call('EXISTS', h) == 1 then variadic('HDEL', h, ids) end
  end
end

-- Removes from finished-set `zset` the members scored at or below `upTo` (at most 100 per call)
-- and the oldest beyond `maxCount`; returns their ids (for `forgetAll`). With `slack`, a set
-- past `maxCount` is cut to `maxCount - slack`: the next calls then add without trimming, and the
-- fixed cost of a trim (a read, a ZREM, a command per hash) is paid once per `slack` tasks.
local function trimFinished(zset, upTo, maxCount, slack)
  -- Numbers go to redis.call as '%d' strings (Redis formats a Lua number with %.17g: costly).
  local old = redis.call('ZRANGEBYSCORE', zset, '-inf', string.format('%d', upTo), 'LIMIT', '0', '100')
  local over = redis.call('ZCARD', zset) - #old - maxCount
  if over > 0 and slack then over = over + slack end
  if over > 0 then
    local last = string.format('%d', #old + over - 1)
    for _, d in ipairs(redis.call('ZRANGE', zset, string.format('%d', #old), last)) do
      old[#old + 1] = d
    end
  end
  if #old > 0 then variadic('ZREM', zset, old) end
  return old
end

-- Deletes `ids` (already taken out of their sets) with their data in the hashes KEYS[first..],
-- writing a `removed` event per id to stream `events` (clean.lua, drain.lua; needs events.lua).
local function removeAll(ids, first, events, maxLen)
  local hashes = {}
  for i = first, #KEYS do hashes[#hashes + 1] = KEYS[i] end
  forgetAll(hashes, ids)
  for _, id in ipairs(ids) do emit(events, maxLen, 'removed', id) end
end
