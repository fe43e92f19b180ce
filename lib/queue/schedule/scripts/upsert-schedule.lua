-- Creates or changes a queue schedule. An unchanged definition is left as it is (so instances
-- that all upsert the same schedule at boot do not move its ticks).
--
-- KEYS[1] definitions  hash: schedule id -> JSON { spec, rev, anchor }
-- KEYS[2] state        hash: schedule id -> '<last tick> <count>'
-- ARGV[1] id
-- ARGV[2] spec     the definition as JSON text (compared as text)
-- ARGV[3] everyMs  '' for a cron schedule
-- ARGV[4] startAt  ms, or ''
--
-- Returns {changed (0/1), rev, now, definition, state or nil}: the schedule as stored (its JSON, as
-- every instance reads it), in the same step (another instance may fire and delete it right
-- after). A changed definition gets a higher rev and a new anchor: its
-- first tick (everyMs: startAt, else now + everyMs; cron: no tick before startAt, else now).
-- The schedule's state (last enqueued tick, count) is kept, so no tick is enqueued twice.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- A revision is never given twice to one id, also across unschedule and schedule again: at least
-- the Redis time in ms (exact through cjson's 14 digits). Counting from 1 again let an instance
-- that missed the change fire the removed definition's tick, with its payload: same revision.
local rev = now
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then
  local d = cjson.decode(old)
  if d.spec == ARGV[2] then return { 0, d.rev, now, old, redis.call('HGET', KEYS[2], ARGV[1]) } end
  rev = math.max(d.rev + 1, now)
end
local anchor = now
if ARGV[4] ~= '' then
  anchor = tonumber(ARGV[4])
elseif ARGV[3] ~= '' then
  anchor = now + tonumber(ARGV[3])
end
local def = cjson.encode({ spec = ARGV[2], rev = rev, anchor = anchor })
redis.call('HSET', KEYS[1], ARGV[1], def)
return { 1, rev, now, def, redis.call('HGET', KEYS[2], ARGV[1]) }
