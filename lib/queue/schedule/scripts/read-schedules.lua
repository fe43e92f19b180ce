-- Reads every schedule of a queue with its state, at one instant.
--
-- KEYS[1] definitions  hash: schedule id -> JSON definition
-- KEYS[2] state        hash: schedule id -> '<last tick> <count>'
--
-- Returns {now, {id, definition, ...}, {id, state, ...}}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return { now, redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]) }
