-- Reads up to `count` dead tasks, oldest death first, without moving them.
--
-- KEYS[1] dead      zset: id -> time of death (ms)
-- KEYS[2] payload   hash: id -> JSON payload
-- KEYS[3] attempts  hash: id -> claims so far
-- ARGV[1] count
--
-- Returns {id_1, diedAt_1, attempts_1, payload_1, ...}; a payload is false when the task has none.

local dead = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
local result = {}
for i = 1, #dead, 2 do
  result[#result + 1] = dead[i]
  result[#result + 1] = dead[i + 1]
  result[#result + 1] = tonumber(redis.call('HGET', KEYS[3], dead[i]) or '0')
  result[#result + 1] = redis.call('HGET', KEYS[2], dead[i])
end
return result
