-- Reads a queue's throughput counters for the last ARGV[1] seconds, oldest first.
--
-- KEYS[1] throughput   hash: epoch second -> tasks completed in it
-- ARGV[1] how many seconds, ending with the last complete second (the current one is still counting)
-- Returns {count of now - ARGV[1], ..., count of now - 1}.

local now = tonumber(redis.call('TIME')[1])
local n = tonumber(ARGV[1])
local fields = {}
for i = n, 1, -1 do fields[#fields + 1] = tostring(now - i) end
local counts = redis.call('HMGET', KEYS[1], unpack(fields))
for i = 1, n do counts[i] = tonumber(counts[i]) or 0 end
return counts
