-- Enqueues the task of one tick of a queue schedule, once: whichever instances fire the tick,
-- only the first call enqueues; a tick at or before the last one enqueued never is (so a late
-- instance cannot enqueue a tick again after its task was acked).
--
-- Writes the task exactly like enqueue.lua does for a task without priority or group (due zset at
-- Redis TIME, payload hash, enqueue time, a dead task's run forgotten, wake-up marker):
-- keep the two in step when the queue's layout changes. A task that exists under the tick's id
-- (the info hash has it) and is not dead is kept unchanged: the tick counts as enqueued.
--
-- KEYS[1] definitions  hash: schedule id -> JSON { spec, rev, anchor }
-- KEYS[2] state        hash: schedule id -> '<last tick> <count>'
-- KEYS[3] due          zset: id -> due time (ms)
-- KEYS[4] leased       zset: id -> lease expiry (ms)
-- KEYS[5] payload      hash: id -> JSON payload
-- KEYS[6] attempts     hash: id -> claims so far
-- KEYS[7] dead         zset: id -> time of death (ms)
-- KEYS[8] wake         list: wake-up marker for idle workers (at most one element)
-- KEYS[9] info         hash: id -> enqueue time (ms) (or options of tasks with priority/group)
-- KEYS[10] errors      hash: id -> last error message
-- ARGV[1] schedule id
-- ARGV[2] rev          the definition's revision the caller computed the tick from
-- ARGV[3] tick         the tick's time (ms)
-- ARGV[4] task id
-- ARGV[5] limit        most tasks the schedule enqueues ('' = no limit)
-- ARGV[6] hasPayload   '1': ARGV[7] is the payload
-- ARGV[7] payload      JSON text
-- KEYS[11] events      stream: the queue's events (../../scripts/includes/events.lua)
-- ARGV[8] eventsMaxLen
-- KEYS[12] config      hash: 'maxSize' -> the queue's own bound (setMaxSize)
-- KEYS[13] done, KEYS[14] cancelled, KEYS[15] expired: finished tasks kept (zsets)
-- ARGV[9] maxSize      the module's bound of tasks queued and running (0: none); the queue's own
--                      (config 'maxSize') wins, as in enqueue.lua
-- KEYS[16] progress, KEYS[17] opts, KEYS[18] results, KEYS[19] logs: hashes by id, and
-- KEYS[20] expiries (zset): what a dead task's run left, forgotten as enqueue.lua's forgetRun does
-- ARGV[10] last         '1': the caller found no tick after this one (endAt)
-- ARGV[11] opts         the task's options JSON ('{"n":<name>}', as enqueue writes it), or ''
-- ARGV[12] name         the task's name (for the 'enqueued' event), or ''
--
-- Returns {result, now, left}: 1 enqueued; 5 enqueued, and it was the schedule's last task
-- (`limit` reached, or ARGV[10]): the schedule (definition and state) is deleted, `left` is the
-- number of schedules the queue has left; 0 enqueued before (by any instance); 2 the schedule
-- reached its limit; 3 the schedule is gone; 4 the queue is full (maxSize): the tick is skipped,
-- not counted, and the next one tries again; -1 its definition changed (re-read it); -2 the tick
-- is not due yet (Redis clock).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local def = redis.call('HGET', KEYS[1], ARGV[1])
if not def then return { 3, now } end
if tostring(cjson.decode(def).rev) ~= ARGV[2] then return { -1, now } end
local tick = tonumber(ARGV[3])
if tick > now then return { -2, now } end

local last, count = nil, 0
local st = redis.call('HGET', KEYS[2], ARGV[1])
if st then
  local l, c = string.match(st, '^(%d+) (%d+)$')
  last, count = tonumber(l), tonumber(c)
end
if last and tick <= last then return { 0, now } end
if ARGV[5] ~= '' and count >= tonumber(ARGV[5]) then return { 2, now } end

local id = ARGV[4]
-- A caller may enqueue any id, a tick's too: a task that exists under it (queued in any way,
-- leased, waiting for children, or finished and kept) is left as it is, as enqueue.lua keeps a
-- repeated id; only a dead one is enqueued again. Checking the due and leased sets alone let a
-- tick overwrite a task with a priority or a group, which then sat in two sets.
if redis.call('HEXISTS', KEYS[9], id) == 0 or redis.call('ZSCORE', KEYS[7], id) then
  -- The queue's bound, counted as enqueue.lua counts it (tasks with an info entry but the
  -- finished ones kept); a tick is one task, so the exact count is read only near the bound.
  local maxSize = tonumber(redis.call('HGET', KEYS[12], 'maxSize') or ARGV[9])
  if maxSize > 0 then
    local entries = redis.call('HLEN', KEYS[9])
    if entries + 1 > maxSize and entries - redis.call('ZCARD', KEYS[7]) - redis.call('ZCARD', KEYS[13])
        - redis.call('ZCARD', KEYS[14]) - redis.call('ZCARD', KEYS[15]) + 1 > maxSize then
      redis.call('HSET', KEYS[2], ARGV[1], string.format('%d %d', tick, count))
      return { 4, now }
    end
  end
  -- The first write is a deny-oom one (HSET): under maxmemory, Redis refuses a script's writes
  -- for OOM only at its first deny-oom command and only while it has written nothing, so a ZREM
  -- or HDEL first let the task and its payload through on a full Redis, a task per tick.
  redis.call('HSET', KEYS[9], id, now)
  -- A dead task's run is forgotten (its options too: the tick's task has only its name), as
  -- enqueue.lua does for an id added again.
  if redis.call('ZREM', KEYS[7], id) == 1 then
    for _, k in ipairs({ KEYS[6], KEYS[10], KEYS[16], KEYS[17], KEYS[18], KEYS[19] }) do
      redis.call('HDEL', k, id)
    end
    redis.call('ZREM', KEYS[20], id)
  end
  if ARGV[6] == '1' then
    redis.call('HSET', KEYS[5], id, ARGV[7])
  else
    redis.call('HDEL', KEYS[5], id)
  end
  redis.call('ZADD', KEYS[3], now, id)
  if ARGV[11] ~= '' then
    redis.call('HSET', KEYS[17], id, ARGV[11])
    emit(KEYS[11], tonumber(ARGV[8]), 'enqueued', id, 'n', ARGV[12])
  else
    emit(KEYS[11], tonumber(ARGV[8]), 'enqueued', id)
  end
  if redis.call('LLEN', KEYS[8]) == 0 then redis.call('RPUSH', KEYS[8], '1') end
end
-- An ended schedule goes (as BullMQ's job schedulers do), or per-entity schedules with a limit or
-- an end would grow both hashes, which every instance re-reads each minute, without bound.
if ARGV[10] == '1' or (ARGV[5] ~= '' and count + 1 >= tonumber(ARGV[5])) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
  return { 5, now, redis.call('HLEN', KEYS[1]) }
end
redis.call('HSET', KEYS[2], ARGV[1], string.format('%d %d', tick, count + 1))
return { 1, now }
