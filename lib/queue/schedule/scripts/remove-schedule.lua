-- Removes a queue schedule and its state. Tasks it already enqueued stay.
--
-- KEYS[1] definitions  hash: schedule id -> JSON definition
-- KEYS[2] state        hash: schedule id -> '<last tick> <count>'
-- ARGV[1] id
--
-- Returns {removed (0/1), schedules left on the queue}.

local removed = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return { removed, redis.call('HLEN', KEYS[1]) }
