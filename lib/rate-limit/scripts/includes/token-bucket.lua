-- Token-bucket rate limit: a bucket of `limit` tokens, refilled at `limit` per `windowMs` (on the
-- Redis clock); a call takes `cost` tokens when the bucket has them. O(1) memory per key; bursts
-- of up to `limit`. The bucket expires once it would be full again. A refusal writes nothing.
--
-- key     HASH: tokens (may be fractional), at (ms of the last write, Redis TIME)
-- limit   bucket size and tokens per window (a positive integer)
-- window  windowMs
-- cost    tokens this call takes (1 .. limit)
-- now, msDigits, frac  the Redis time (includes/redis-time.lua)
--
-- Returns allowed (1 or 0), remaining, retryAfterMs, resetMs: whole tokens left; retryAfterMs
-- (refused) until `cost` tokens are there; resetMs until the bucket is full.
local function tokenBucket(key, limit, window, cost, now, msDigits, frac)
  local rate = limit / window
  local stored = redis.call('HMGET', key, 'tokens', 'at')
  local tokens = limit
  if stored[1] then
    -- A lowered limit caps what is stored; a raised one refills faster from here on.
    tokens = math.min(limit, tonumber(stored[1]) + (now - tonumber(stored[2])) * rate)
  end
  if tokens < cost then
    return 0, math.floor(tokens), math.max(1, math.ceil((cost - tokens) / rate)),
      math.max(1, math.ceil((limit - tokens) / rate))
  end
  tokens = tokens - cost
  local reset = math.max(1, math.ceil((limit - tokens) / rate))
  redis.call('HSET', key, 'tokens', string.format('%.17g', tokens), 'at', msDigits .. '.' .. frac)
  redis.call('PEXPIRE', key, reset)
  return 1, math.floor(tokens), 0, reset
end
