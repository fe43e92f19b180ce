-- Token-bucket rate limit: a bucket of `limit` tokens, refilled at `limit` per `windowMs` (on the
-- Redis clock); a call takes `cost` tokens when the bucket has them. O(1) memory per key; bursts
-- of up to `limit`. The bucket expires once it would be full again. A refusal writes nothing.
-- The call that took tokens last is recorded: the same call run again (ioredis sends a command
-- again when its connection closed before the reply; after a failover the promoted replica may
-- have run the first) takes nothing and is answered as admitted, unless another call took tokens
-- in between (then it takes its cost twice).
--
-- key     STRING "<tokens> <at> <id>": the tokens (may be fractional), when they were counted (ms,
--         Redis TIME) and the call that took them; one SET with PX writes them and the expiry
--         (a bucket written without the id reads as one with none)
-- limit   bucket size and tokens per window (a positive integer)
-- window  windowMs
-- cost    tokens this call takes (1 .. limit)
-- id      an id unique to this call, without spaces
-- now, msDigits, frac  the Redis time (includes/redis-time.lua)
--
-- Returns allowed (1 or 0), remaining, retryAfterMs, resetMs: whole tokens left (0 when the bucket
-- reads as below empty: a Redis clock that went back, e.g. on a promoted replica); retryAfterMs
-- (refused) until `cost` tokens are there; resetMs until the bucket is full.
local function tokenBucket(key, limit, window, cost, id, now, msDigits, frac)
  local rate = limit / window
  local stored = redis.call('GET', key)
  local tokens = limit
  if stored then
    local left, at, last = string.match(stored, '^(%S+) (%S+) ?(%S*)$')
    -- A lowered limit caps what is stored; a raised one refills faster from here on.
    tokens = math.min(limit, tonumber(left) + (now - tonumber(at)) * rate)
    if last == id then
      return 1, math.max(0, math.floor(tokens)), 0, math.max(1, math.ceil((limit - tokens) / rate))
    end
  end
  if tokens < cost then
    return 0, math.max(0, math.floor(tokens)), math.max(1, math.ceil((cost - tokens) / rate)),
      math.max(1, math.ceil((limit - tokens) / rate))
  end
  tokens = tokens - cost
  local reset = math.max(1, math.ceil((limit - tokens) / rate))
  local value = string.format('%.17g', tokens) .. ' ' .. msDigits .. '.' .. frac .. ' ' .. id
  redis.call('SET', key, value, 'PX', reset)
  return 1, math.floor(tokens), 0, reset
end
