-- Removes a queue schedule and its state. Tasks it already enqueued stay.
--
-- KEYS[1] definitions  hash: schedule id -> JSON definition
-- KEYS[2] state        hash: schedule id -> '<last tick> <count>'
-- ARGV[1] id
-- ARGV[2] rev          only this revision ('' = any): an ended schedule is removed by the instance
--                      that found it ended, unless it was changed meanwhile
--
-- Returns {removed (0/1), schedules left on the queue}.

if ARGV[2] and ARGV[2] ~= '' then
  local def = redis.call('HGET', KEYS[1], ARGV[1])
  if def and tostring(cjson.decode(def).rev) ~= ARGV[2] then
    return { 0, redis.call('HLEN', KEYS[1]) }
  end
end
local removed = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return { removed, redis.call('HLEN', KEYS[1]) }
