-- Moves dead tasks back to the queue, ready at once, with their attempt count and last error
-- reset and their payload kept. A grouped task takes its old place in its group; a task with a
-- priority keeps it.
--
-- KEYS[1]  dead      zset: id -> time of death (ms)
-- KEYS[2]  due       zset: id -> due time (ms) of tasks without priority or group
-- KEYS[3]  attempts  hash: id -> claims so far
-- KEYS[4]  wake      list: wake-up marker for idle workers (at most one element)
-- KEYS[5]  info      hash: id -> 'enqueuedAt' or 'enqueuedAt|dueAt|priority|seq|group'
-- KEYS[6]  errors    hash: id -> last error message
-- KEYS[7]  prio      zset: id -> (priority + 1000) * 2^41 + seq
-- KEYS[8]  gtasks    zset (all scores 0): group \0 seq(15 digits) \0 id
-- KEYS[9]  ring      zset: group -> turn
-- KEYS[10] gpark     zset: group -> time its next task may start
-- KEYS[11] events    stream: the queue's events (includes/events.lua)
-- KEYS[12] progress  hash: id -> JSON of the last progress value
-- KEYS[13] opts      hash: id -> JSON of the task's own options ("x": its deadline)
-- KEYS[14] expiries  zset: id -> deadline of waiting tasks with one (includes/expiry.lua): a
--                    task waits again, so its deadline is indexed again (its death dropped it)
-- ARGV[1] max       when no ids follow: move the `max` oldest dead tasks
-- ARGV[2] eventsMaxLen
-- ARGV[3..] ids     move these (ids that are not dead are skipped)
--
-- Returns the number of tasks moved.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = {}
if #ARGV > 2 then
  for i = 3, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
end
local moved = 0
-- Only a queue with task options can hold a deadline: one EXISTS, not a read per task.
local hasOpts = #ids > 0 and redis.call('EXISTS', KEYS[13]) == 1
for _, id in ipairs(ids) do
  if redis.call('ZREM', KEYS[1], id) == 1 then
    local x = hasOpts and expiryOf(redis.call('HGET', KEYS[13], id))
    if x then redis.call('ZADD', KEYS[14], x, id) end
    redis.call('HDEL', KEYS[3], id)
    redis.call('HDEL', KEYS[6], id)
    redis.call('HDEL', KEYS[12], id)
    emit(KEYS[11], tonumber(ARGV[2]), 'enqueued', id)
    local m = parseInfo(redis.call('HGET', KEYS[5], id))
    if not m then
      redis.call('ZADD', KEYS[2], now, id)
    elseif m.group ~= '' then
      redis.call('ZADD', KEYS[8], 0, groupMember(m.group, m.seq, id))
      if not redis.call('ZSCORE', KEYS[10], m.group) then joinRing(KEYS[9], m.group) end
    else
      redis.call('ZADD', KEYS[7], prioScore(m.prio, m.seq), id)
    end
    moved = moved + 1
  end
end
if moved > 0 then
  redis.call('LPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], 0, 0)
end
return moved
