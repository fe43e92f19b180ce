-- Deletes waiting tasks (ready; with `delayed`, delayed ones too) with everything stored about
-- them, leaving leased and finished tasks alone: one bounded chunk per call (the caller loops
-- while `more` is 1). Each deleted task writes a `removed` event.
--
-- KEYS[1]  due       zset: id -> due time (ms) of tasks without priority or group
-- KEYS[2]  pending   zset: id -> due time of delayed tasks with a priority or a group
-- KEYS[3]  prio      zset: ready tasks with a priority
-- KEYS[4]  gtasks    zset (all scores 0): group \0 seq(15 digits) \0 id
-- KEYS[5]  ring      zset: group -> turn (emptied with gtasks)
-- KEYS[6]  events    stream: the queue's events (includes/events.lua)
-- KEYS[7]  parents   hash: child id -> link to its flow parent (includes/flow.lua)
-- KEYS[8]  outbox    list: child outcomes for their parents (the store applies them)
-- KEYS[9]  expiries  zset: id -> deadline of tasks enqueued with one (includes/expiry.lua)
-- KEYS[10..] the hashes that hold a task's data (payload, attempts, info, errors, results,
--           progress, opts, logs, dnext, flow, parents: a drained child's link goes with it)
-- ARGV[1] delayed     '1': delayed tasks too
-- ARGV[2] take        tasks to delete at most in this call (1 to 1,000)
-- ARGV[3] eventsMaxLen
--
-- Flows: a drained flow child had not completed, so it counts as failed for its parent, exactly as
-- remove.lua does (error {name 'QueueError', message 'removed'}; its onChildFailure decides what
-- the parent does), told through the outbox. A parent waiting for its children is in none of the
-- sets drained, so it stays.
--
-- Returns {deleted, more, pushed}: more is 1 when this call stopped at `take`; pushed is 1 when an
-- outcome was pushed to the outbox (the store then applies it).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local delayed = ARGV[1] == '1'
local take = tonumber(ARGV[2])
local ids = {}

-- Takes up to the rest of `take` members from zset `key` (by score up to `upTo`, or all).
local function collect(key, upTo)
  local left = take - #ids
  if left <= 0 then return end
  local members
  if upTo then
    members = redis.call('ZRANGEBYSCORE', KEYS[key], '-inf', upTo, 'LIMIT', 0, left)
  else
    members = redis.call('ZRANGE', KEYS[key], 0, left - 1)
  end
  if #members == 0 then return end
  variadic('ZREM', KEYS[key], members)
  for _, m in ipairs(members) do
    -- a gtasks member is group \0 seq \0 id
    ids[#ids + 1] = key == 4 and string.match(m, '^.-%z%d+%z(.*)$') or m
  end
end

collect(1, (not delayed) and now or nil)
collect(2, (not delayed) and now or nil)
collect(3, nil)
collect(4, nil)
if redis.call('EXISTS', KEYS[4]) == 0 then redis.call('DEL', KEYS[5]) end
local pushed = 0
-- One EXISTS per call: a queue without flow children reads no link.
if #ids > 0 and redis.call('EXISTS', KEYS[7]) == 1 then
  local removed = cjson.encode({name = 'QueueError', message = 'removed'})
  local maxLen = tonumber(ARGV[3])
  for _, id in ipairs(ids) do
    if childEnded(KEYS[7], KEYS[8], nil, id, 'f', removed, now, maxLen) then pushed = 1 end
  end
end
if #ids > 0 then
  -- Their deadlines' entries: one ZREM per 1,000 tasks (a key that does not exist costs nothing
  -- more than asking whether it does).
  variadic('ZREM', KEYS[9], ids)
  removeAll(ids, 10, KEYS[6], tonumber(ARGV[3]))
end
return {#ids, #ids >= take and 1 or 0, pushed}
