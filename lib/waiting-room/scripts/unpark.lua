-- Ends the parking of visitors that stopped waiting on an instance without being admitted (gave
-- up, timed out, the instance shuts down): they count as seen now and keep their places for
-- `absent` ms.
-- KEYS: see includes/room.lua. ARGV[1] sharded, ARGV[2] instance id, ARGV[3..] visitors.
-- Returns the number of visitors unparked.

local now = clock()
local count = 0
for i = 3, #ARGV do
  local visitor = ARGV[i]
  if redis.call('HGET', parkedBy, visitor) == ARGV[2] then
    redis.call('HDEL', parkedBy, visitor)
    redis.call('ZREM', parkedSet(ARGV[2]), visitor)
    redis.call('ZADD', seen, 'XX', now, visitor)
    count = count + 1
  end
end
return count
