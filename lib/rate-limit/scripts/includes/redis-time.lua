-- Redis TIME in ms, as a number and as the digits of the same value ("<ms>" and "<µs part>").
-- Scores and stored times go to redis.call as strings built from these digits: a Lua number given
-- to redis.call is formatted by Redis with %.17g, which costs more than a ZADD or an HSET itself
-- (bench/rate-limit-profile.ts).
--
-- Returns now (ms, a number with µs), msDigits (whole ms, a string), frac (the 3 digits of µs).
local function redisTimeMs()
  local t = redis.call('TIME')
  local us = timeMicros(t)
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000, string.sub(us, 1, -4), string.sub(us, -3)
end
