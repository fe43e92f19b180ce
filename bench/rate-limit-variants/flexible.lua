-- rate-limiter-flexible 11.4's RateLimiterRedis script (lib/RateLimiterRedis.js), verbatim:
-- KEYS[1] counter; ARGV: points, secDuration, (points, duration unused).
redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX')
local consumed = redis.call('incrby', KEYS[1], ARGV[1])
local ttl = redis.call('pttl', KEYS[1])
if ttl == -1 then
  redis.call('expire', KEYS[1], ARGV[2])
  ttl = 1000 * ARGV[2]
end
return {consumed, ttl}
