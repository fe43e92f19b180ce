-- Moves dead tasks back to the queue, ready at once, with their attempt count reset and their
-- payload kept.
--
-- KEYS[1] dead      zset: id -> time of death (ms)
-- KEYS[2] due       zset: id -> due time (ms)
-- KEYS[3] attempts  hash: id -> claims so far
-- KEYS[4] wake      list: wake-up marker for idle workers (at most one element)
-- ARGV[1] max       when no ids follow: move the `max` oldest dead tasks
-- ARGV[2..] ids     move these (ids that are not dead are skipped)
--
-- Returns the number of tasks moved.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = {}
if #ARGV > 1 then
  for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
end
local moved = 0
for _, id in ipairs(ids) do
  if redis.call('ZREM', KEYS[1], id) == 1 then
    redis.call('HDEL', KEYS[3], id)
    redis.call('ZADD', KEYS[2], now, id)
    moved = moved + 1
  end
end
if moved > 0 then
  redis.call('LPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], 0, 0)
end
return moved
