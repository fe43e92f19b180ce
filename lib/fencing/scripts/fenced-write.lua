-- Writes a fenced resource: stores the value only if the writer's fence is higher than the
-- highest fence the resource has seen, or equal to it and from the same writer (compare-and-set
-- on the fence and the writer's token, one atomic step).
--
-- KEYS[1] resource  hash: 'fence' -> highest fence written so far, 'value' -> the value it wrote,
--                   'token' -> the token of the writer that wrote it (absent: written with a
--                   bare fence, no token)
-- ARGV[1] fence     the writer's fencing token (a positive integer, e.g. lock.fence)
-- ARGV[2] value     the value to store
-- ARGV[3] token     the writer's lock token (e.g. lock.token), or '' for a bare fence
--
-- Returns {1, fence} when written (the fence is now the highest seen),
--         {0, highest} when refused: a newer holder already wrote with `highest`, or another
--         writer (another token, or a bare fence where a token wrote, or the other way round)
--         wrote with this same fence. One holder may write the same resource many times; two
--         holders that were handed the same fence (a failover that lost the counter's last
--         increments) cannot both write.

local fence = tonumber(ARGV[1])
local seen = redis.call('HMGET', KEYS[1], 'fence', 'token')
local highest = tonumber(seen[1] or '0')
if fence < highest or (fence == highest and (seen[2] or '') ~= ARGV[3]) then
  return {0, highest}
end
if ARGV[3] == '' then
  redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
  if seen[2] then redis.call('HDEL', KEYS[1], 'token') end
else
  redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2], 'token', ARGV[3])
end
return {1, fence}
