-- Writes a fenced resource: stores the value only if the writer's fence is not lower than the
-- highest fence the resource has seen (compare-and-set on the fence, one atomic step).
--
-- KEYS[1] resource  hash: 'fence' -> highest fence written so far, 'value' -> the value it wrote
-- ARGV[1] fence     the writer's fencing token (a positive integer, e.g. lock.fence)
-- ARGV[2] value     the value to store
--
-- Returns {1, fence} when written (the fence is now the highest seen),
--         {0, highest} when refused because a newer holder already wrote with `highest`.
-- Equal fences are accepted: one holder may write the same resource many times.

local fence = tonumber(ARGV[1])
local highest = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if fence < highest then
  return {0, highest}
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
return {1, fence}
