-- Redis TIME as one string of the microseconds since the epoch: 16 digits, which Lua would print
-- as 1.7e+15, and which given to redis.call as a number Redis would format with %.17g (costly).
-- `t`: a TIME reply the script read already; without it, TIME is read. Put before every script
-- that reads the clock in µs or ms (TIME_MICROS_PRELUDE, lib/redis/lua-script.ts): fences,
-- lines, the rate limiter.
local function timeMicros(t)
  t = t or redis.call('TIME')
  return t[1] .. string.sub('00000' .. t[2], -6)
end
