-- Quorum mode (Redlock), on one node: the write-back of a granted lock's fences. Raises each fence
-- counter to the fence the client chose, but only where every counter is still below it: a node
-- that already saw that fence (or a higher one) refuses, and the client tries again above it.
-- A lock's grant is reported only once a majority accepted, so two grants' majorities share a
-- node, whose counter refuses the later grant any fence not above the earlier one
-- (quorum-lock-store.ts).
--
-- KEYS  the fence counter of each lock (fence-counter.lua, put before this)
-- ARGV[1] fenceTtl  ms a counter created here lives
-- ARGV[2..n+1]      the fence chosen for each lock
--
-- Returns {1} when every counter was below its fence and is set to it now;
--         {0, last_1, ..., last_n} when at least one was not (then nothing is changed): each
--         counter's value, a missing counter (a node restarted empty, or the counter's TTL passed)
--         counting as Redis TIME in microseconds (timeMicros), above every fence handed out before.

local last = {}
local below = true
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if not v then
    v = timeMicros()
    redis.call('SET', KEYS[i], v, 'PX', ARGV[1])
  end
  last[i] = tonumber(v)
  if last[i] >= tonumber(ARGV[i + 1]) then below = false end
end
if not below then
  local reply = {0}
  for i = 1, #KEYS do reply[i + 1] = last[i] end
  return reply
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[i + 1], 'KEEPTTL')
end
return {1}
