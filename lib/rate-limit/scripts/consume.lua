-- Rate limit checks: the consumes one process made in the same tick (rate-limiter.service.ts),
-- each counted exactly as if alone (includes/sliding-window.lua, includes/token-bucket.lua), in
-- the order they were made, at one Redis time. One failing check (a key of another type) fails
-- alone.
--
-- KEYS[i]   the key of check i: a sliding window's log or a token bucket
-- ARGV[5i-4 .. 5i]  check i: algorithm ('s' sliding window, 't' token bucket), limit, windowMs,
--                   cost, id (unique to the check, without ':', ',' or spaces)
--
-- Returns 4 values per check: allowed (1 or 0), remaining, retryAfterMs, resetMs; or -1 and the
-- error message, 0, 0 when the check failed.

local now, msDigits, frac = redisTimeMs()
-- The call's id: its first check's. A token bucket records with it which checks of the call took
-- its tokens, so that the call run again counts none of them twice (includes/token-bucket.lua).
local call = ARGV[5]
local alone = #KEYS == 1
local out = {}
for i = 1, #KEYS do
  local a = 5 * i - 5
  local limit, window, cost = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  local ok, allowed, remaining, retryAfter, reset
  if ARGV[a + 1] == 's' then
    ok, allowed, remaining, retryAfter, reset = pcall(slidingWindow, KEYS[i], limit, window,
      ARGV[a + 3], cost, ARGV[a + 5], now, msDigits, frac)
  else
    ok, allowed, remaining, retryAfter, reset = pcall(tokenBucket, KEYS[i], limit, window, cost,
      call, alone and 0 or i, now, msDigits, frac)
  end
  if not ok then
    local message = type(allowed) == 'table' and allowed.err or tostring(allowed)
    allowed, remaining, retryAfter, reset = -1, message, 0, 0
  end
  out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = allowed, remaining, retryAfter, reset
end
return out
