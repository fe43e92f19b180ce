-- Variant: the library's token bucket before `at` became a string built from TIME (formatted
-- with %.3f).
-- Token-bucket rate limit: a bucket of `limit` tokens, refilled at `limit` per `windowMs` (on the
-- Redis clock); a call takes `cost` tokens when the bucket has them. O(1) memory per key; bursts
-- of up to `limit`. The bucket expires once it would be full again. A refusal writes nothing.
--
-- KEYS[1] bucket  HASH: tokens (may be fractional), at (ms of the last write, Redis TIME)
-- ARGV[1] limit   bucket size and tokens per window (a positive integer)
-- ARGV[2] window  windowMs
-- ARGV[3] cost    tokens this call takes (1 .. limit)
--
-- Returns { allowed (1 or 0), remaining, retryAfterMs, resetMs }: whole tokens left;
-- retryAfterMs (refused) until `cost` tokens are there; resetMs until the bucket is full.

local limit, window, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local rate = limit / window
local stored = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = limit
if stored[1] then
  -- A lowered limit caps what is stored; a raised one refills faster from here on.
  tokens = math.min(limit, tonumber(stored[1]) + (now - tonumber(stored[2])) * rate)
end
if tokens < cost then
  return { 0, math.floor(tokens), math.max(1, math.ceil((cost - tokens) / rate)),
    math.max(1, math.ceil((limit - tokens) / rate)) }
end
tokens = tokens - cost
local reset = math.max(1, math.ceil((limit - tokens) / rate))
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.3f', now))
redis.call('PEXPIRE', KEYS[1], reset)
return { 1, math.floor(tokens), 0, reset }
