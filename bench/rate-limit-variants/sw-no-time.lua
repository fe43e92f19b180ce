-- Variant: the time from ARGV[5] instead of TIME (what TIME costs; not acceptable: Redis time only).
local limit, window, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local used = redis.call('ZCARD', KEYS[1])
if used + cost <= limit then
  local args = {}
  for n = 1, cost do
    args[2 * n - 1] = now
    args[2 * n] = ARGV[4] .. ':' .. n
  end
  redis.call('ZADD', KEYS[1], unpack(args))
  redis.call('PEXPIRE', KEYS[1], window)
  return { 1, limit - used - cost, 0, window }
end
return { 0, limit - used, 1, 1 }
