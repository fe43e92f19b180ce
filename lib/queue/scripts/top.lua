-- Reads up to `count` ready tasks (due <= now), lowest due time first, without removing them.
--
-- KEYS[1] due       zset: id -> due time (ms)
-- KEYS[2] payload   hash: id -> JSON payload
-- ARGV[1] count
--
-- Returns {id_1, score_1, payload_1, ..., id_n, score_n, payload_n}; a payload is false when the
-- task has none.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ready = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
local result = {}
for i = 1, #ready, 2 do
  result[#result + 1] = ready[i]
  result[#result + 1] = ready[i + 1]
  result[#result + 1] = redis.call('HGET', KEYS[2], ready[i])
end
return result
