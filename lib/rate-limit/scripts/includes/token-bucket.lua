-- Token-bucket rate limit: a bucket of `limit` tokens, refilled at `limit` per `windowMs` (on the
-- Redis clock); a call takes `cost` tokens when the bucket has them. O(1) memory per key; bursts
-- of up to `limit`. The bucket expires once it would be full again. A refusal writes nothing.
--
-- key     STRING "<tokens> <at>": the tokens (may be fractional) and when they were counted (ms,
--         Redis TIME); one SET with PX writes both and the expiry
-- limit   bucket size and tokens per window (a positive integer)
-- window  windowMs
-- cost    tokens this call takes (1 .. limit)
-- now, msDigits, frac  the Redis time (includes/redis-time.lua)
--
-- Returns allowed (1 or 0), remaining, retryAfterMs, resetMs: whole tokens left; retryAfterMs
-- (refused) until `cost` tokens are there; resetMs until the bucket is full.
local function tokenBucket(key, limit, window, cost, now, msDigits, frac)
  local rate = limit / window
  local stored = redis.call('GET', key)
  local tokens = limit
  if stored then
    local left, at = string.match(stored, '^(%S+) (%S+)$')
    -- A lowered limit caps what is stored; a raised one refills faster from here on.
    tokens = math.min(limit, tonumber(left) + (now - tonumber(at)) * rate)
  end
  if tokens < cost then
    return 0, math.floor(tokens), math.max(1, math.ceil((cost - tokens) / rate)),
      math.max(1, math.ceil((limit - tokens) / rate))
  end
  tokens = tokens - cost
  local reset = math.max(1, math.ceil((limit - tokens) / rate))
  redis.call('SET', key, string.format('%.17g', tokens) .. ' ' .. msDigits .. '.' .. frac, 'PX', reset)
  return 1, math.floor(tokens), 0, reset
end
