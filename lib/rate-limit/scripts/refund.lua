-- Gives back what rate limit checks counted when their script call's reply came too late (their
-- callers were told RedisUnavailableError, rate-limiter.service.ts): a sliding window's entries
-- of the check are removed; a token bucket gets the check's cost back, never above `limit` (what
-- refilled meanwhile is kept). A bucket given back tokens records this call: the same call run
-- again (ioredis sent it twice) gives nothing more back, unless another call took tokens from that
-- bucket in between.
--
-- KEYS[i]   the key of check i: a sliding window's log or a token bucket
-- ARGV[1]   an id unique to this call, without spaces or ','
-- ARGV[5i-3 .. 5i+1]  check i as consume.lua took it: algorithm ('s' or 't'), limit, windowMs,
--                     cost, id
--
-- Returns the number of checks that gave something back.

-- Members per ZREM (unpack refuses more than about 8,000 values; see sliding-window.lua).
local ZREM_CHUNK = 1000

local now, msDigits, frac = redisTimeMs()
local mark = ARGV[1]
-- Per bucket, decided at its first check: whether this call gave it tokens before (run twice).
local again = {}
local given = 0
for i = 1, #KEYS do
  local key, a = KEYS[i], 5 * i - 4
  local limit, window, cost, id =
    tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), ARGV[a + 5]
  if ARGV[a + 1] == 's' then
    local removed = 0
    if cost == 1 then
      removed = redis.call('ZREM', key, id)
    else
      local members = {}
      for first = 1, cost, ZREM_CHUNK do
        local k = 0
        for n = first, math.min(cost, first + ZREM_CHUNK - 1) do
          k = k + 1
          members[k] = id .. ':' .. n
        end
        removed = removed + redis.call('ZREM', key, unpack(members, 1, k))
      end
    end
    if removed > 0 then given = given + 1 end
  else
    -- No bucket: it is full (expired), nothing to give back.
    local stored = redis.call('GET', key)
    if stored then
      local left, at, last = string.match(stored, '^(%S+) (%S+) ?(%S*)$')
      if again[key] == nil then again[key] = last == mark end
      if not again[key] then
        local rate = limit / window
        local tokens = math.min(limit, tonumber(left) + (now - tonumber(at)) * rate + cost)
        if tokens >= limit then
          redis.call('DEL', key)
        else
          redis.call('SET', key, string.format('%.17g', tokens) .. ' ' .. msDigits .. '.' .. frac ..
            ' ' .. mark, 'PX', math.max(1, math.ceil((limit - tokens) / rate)))
        end
        given = given + 1
      end
    end
  end
end
return given
