-- Sliding-window rate limit: a log of what was admitted in the last `windowMs`. Admits `cost`
-- more units when those already in the window plus `cost` stay within `limit`, so no window of
-- `windowMs` (on the Redis clock) ever admits more than `limit`. A refusal writes nothing. The
-- same call run twice (the same id) is admitted once, and answered as admitted both times.
--
-- key     ZSET: member "<call id>" (cost 1) or "<call id>:<n>" -> time admitted (ms, Redis TIME,
--         with µs)
-- limit   units per window (a positive integer)
-- window  windowMs (a number), windowArg the same as sent (a string: PEXPIRE takes it as is)
-- cost    units this call takes (1 .. limit)
-- id      an id unique to this call, without ':' (the members of a call of cost > 1 are
--         "<id>:1" .. "<id>:<cost>")
-- now, msDigits, frac  the Redis time (includes/redis-time.lua)
--
-- Returns allowed (1 or 0), remaining, retryAfterMs, resetMs: remaining units now (0 when a
-- lowered limit leaves more counted than it allows); retryAfterMs (refused) until `cost` units
-- fit; resetMs until the window is empty.

-- Members per ZADD of a call of cost > 1: its arguments go through unpack, which refuses more than
-- about 8,000 values (a cost of 4,000), and a cost may be up to 100,000.
local ZADD_CHUNK = 1000

local function slidingWindow(key, limit, window, windowArg, cost, id, now, msDigits, frac)
  -- An entry admitted at s counts while now < s + window: the expired ones score up to `edge`.
  -- They are counted out by reading, and removed only after the ZADD: under maxmemory, Redis
  -- refuses a script's writes for OOM only while it has written nothing, at its first deny-oom
  -- command (ZADD is one, ZREMRANGEBYSCORE is not). Trimming first let every ZADD after it
  -- through on a full Redis. A refusal writes nothing, so it cannot open the way for the checks
  -- after it in consume.lua either.
  local edge = string.format('%d.%s', tonumber(msDigits) - window, frac)
  local used = redis.call('ZCOUNT', key, '(' .. edge, '+inf')
  -- A limit lowered since the entries were admitted may leave more counted than it allows.
  local left = math.max(0, limit - used)
  if used + cost <= limit then
    local at = msDigits .. '.' .. frac
    local added
    if cost == 1 then
      added = redis.call('ZADD', key, 'NX', at, id)
    else
      added = 0
      local args = {}
      for first = 1, cost, ZADD_CHUNK do
        local k = 0
        for n = first, math.min(cost, first + ZADD_CHUNK - 1) do
          args[k + 1], args[k + 2] = at, id .. ':' .. n
          k = k + 2
        end
        added = added + redis.call('ZADD', key, 'NX', unpack(args, 1, k))
      end
    end
    redis.call('ZREMRANGEBYSCORE', key, '-inf', edge)
    -- Nothing added: this same call ran before (see below); its entries are counted in `used`.
    if added == 0 then return 1, left, 0, window end
    redis.call('PEXPIRE', key, windowArg)
    return 1, limit - used - cost, 0, window
  end
  -- Admitted already: ioredis sends a command again when its connection closed before the reply,
  -- and after a failover the promoted replica may have run the first call (whose entries may be
  -- what fills the window now). The id is unique to the call.
  if redis.call('ZSCORE', key, cost == 1 and id or id .. ':1') then
    return 1, left, 0, window
  end
  -- Refused: `cost` fits once the (used + cost - limit) oldest entries have left the window. The
  -- expired entries (not removed on this path) rank before them.
  local expired = redis.call('ZCARD', key) - used
  local rank = expired + used + cost - limit - 1
  local oldest = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return 0, left, math.max(1, math.ceil(tonumber(oldest[2]) + window - now)),
    math.max(1, math.ceil(tonumber(newest[2]) + window - now))
end
