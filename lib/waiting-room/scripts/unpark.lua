-- Ends the parking of visitors that stopped waiting on an instance without being admitted (gave
-- up, timed out, the instance shuts down): they count as seen now and keep their places for
-- `absent` ms.
-- KEYS: see includes/room.lua. ARGV[1] sharded, ARGV[2] instance id, ARGV[3..] visitors.
-- A visitor still parked on another instance (another tab waiting there) stays parked.
-- Returns the number of visitors no longer parked on the instance.

local now = clock()
local set = parkedSet(ARGV[2])
local count = 0
for i = 3, #ARGV do
  local visitor = ARGV[i]
  count = count + redis.call('ZREM', set, visitor)
  unparkOn(visitor, ARGV[2], now)
end
return count
