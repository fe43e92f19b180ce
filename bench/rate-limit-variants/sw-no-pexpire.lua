-- Variant: no PEXPIRE (what the expiry costs; not acceptable: state must expire).
local limit, window, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local used = redis.call('ZCARD', KEYS[1])
if used + cost <= limit then
  local args = {}
  for n = 1, cost do
    args[2 * n - 1] = now
    args[2 * n] = ARGV[4] .. ':' .. n
  end
  redis.call('ZADD', KEYS[1], unpack(args))
  return { 1, limit - used - cost, 0, window }
end
return { 0, limit - used, 1, 1 }
