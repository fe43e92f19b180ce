-- Reads one schedule of a queue with its state, at one instant (a change announced for it).
--
-- KEYS[1] definitions  hash: schedule id -> JSON definition
-- KEYS[2] state        hash: schedule id -> '<last tick> <count>'
-- ARGV[1] id
--
-- Returns {now, definition or nil, state or nil}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return { now, redis.call('HGET', KEYS[1], ARGV[1]), redis.call('HGET', KEYS[2], ARGV[1]) }
