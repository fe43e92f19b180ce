-- Token-bucket rate limit: a bucket of `limit` tokens, refilled at `limit` per `windowMs` (on the
-- Redis clock); a call takes `cost` tokens when the bucket has them. O(1) memory per key; bursts
-- of up to `limit`. The bucket expires once it would be full again. A refusal writes nothing.
-- The script call that took tokens last is recorded, with which of its checks took them: the
-- same call run again (ioredis sends a command again when its connection closed before the reply;
-- after a failover the promoted replica may have run the first) takes nothing for those checks and
-- answers them as admitted, and counts its other checks as if alone, unless another call took
-- tokens in between (then those checks take their cost twice).
--
-- key     STRING "<tokens> <at> <last>": the tokens (may be fractional), when they were counted
--         (ms, Redis TIME) and the script call that took them: "<call>" for a call of one check,
--         "<call>,<place>,<place>…" for a call of several (the places of its checks that took
--         tokens here, at most one per check of the call); one SET with PX writes them and the
--         expiry (a bucket written without the call reads as one with none)
-- limit   bucket size and tokens per window (a positive integer)
-- window  windowMs
-- cost    tokens this call takes (1 .. limit)
-- call    an id unique to the script call, without spaces or ','
-- place   this check's place in the script call (1 ..), 0 when it is the call's only check
-- now, msDigits, frac  the Redis time (includes/redis-time.lua)
--
-- Returns allowed (1 or 0), remaining, retryAfterMs, resetMs: whole tokens left (0 when the bucket
-- reads as below empty: a Redis clock that went back, e.g. on a promoted replica); retryAfterMs
-- (refused) until `cost` tokens are there; resetMs until the bucket is full.
local function tokenBucket(key, limit, window, cost, call, place, now, msDigits, frac)
  local rate = limit / window
  local stored = redis.call('GET', key)
  local tokens = limit
  -- This script call's record here ("<call>,<place>…"), when one of its checks took tokens last.
  local ours
  if stored then
    local left, at, last = string.match(stored, '^(%S+) (%S+) ?(%S*)$')
    -- A lowered limit caps what is stored; a raised one refills faster from here on.
    tokens = math.min(limit, tonumber(left) + (now - tonumber(at)) * rate)
    local counted
    if place == 0 then
      counted = last == call
    elseif string.byte(last, #call + 1) == 44 and string.find(last, call, 1, true) == 1 then
      -- 44: ','. Recording only the last check of the call that took tokens let a second run
      -- count all the others again (the consumes of one hot key made in one tick share a call).
      ours = last
      counted = string.find(last .. ',', ',' .. place .. ',', #call + 1, true) ~= nil
    end
    if counted then
      return 1, math.max(0, math.floor(tokens)), 0, math.max(1, math.ceil((limit - tokens) / rate))
    end
  end
  if tokens < cost then
    return 0, math.max(0, math.floor(tokens)), math.max(1, math.ceil((cost - tokens) / rate)),
      math.max(1, math.ceil((limit - tokens) / rate))
  end
  tokens = tokens - cost
  local reset = math.max(1, math.ceil((limit - tokens) / rate))
  local value = string.format('%.17g', tokens) .. ' ' .. msDigits .. '.' .. frac .. ' ' ..
    (place == 0 and call or (ours or call) .. ',' .. place)
  redis.call('SET', key, value, 'PX', reset)
  return 1, math.floor(tokens), 0, reset
end
