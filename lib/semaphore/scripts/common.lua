-- Shared part of the semaphore scripts: prepended to each of them when they are loaded
-- (semaphore-scripts.ts, after fence-counter.lua and lib/waiting/scripts/line.lua), so every
-- script is one self-contained EVAL body.
--
-- Keys of one semaphore (5, in this order; all under one hash tag):
--   holders  zset: holder token -> expiry (ms, Redis clock); each permit grant expires on its own
--   meta     hash: 'limit' (stored with the semaphore), 'used' (permits held), 'fence' (counter),
--                  <token> -> "permits:fence" of each holder
--   line     zset: waiting tokens in arrival order (score = last + 1)
--   entries  hash: waiting token -> "deadlineMs:ttlMs:permits" (deadline renewed by renew.lua)
--   channel  pub/sub channel of grants: 'h <token> <fence> <nowMs> <ttlMs>'

local now = clock()

-- The keys of the i-th semaphore (0-based) of KEYS.
local function semKeys(i)
  return {
    holders = KEYS[i * 5 + 1],
    meta = KEYS[i * 5 + 2],
    line = KEYS[i * 5 + 3],
    entries = KEYS[i * 5 + 4],
    channel = KEYS[i * 5 + 5],
  }
end

-- Removes a holder and gives its permits back; true when the token held permits.
local function drop(k, token)
  if redis.call('ZREM', k.holders, token) == 0 then return false end
  local held = redis.call('HGET', k.meta, token)
  redis.call('HDEL', k.meta, token)
  if held then redis.call('HINCRBY', k.meta, 'used', -tonumber(string.match(held, '^%d+'))) end
  return true
end

-- Permits whose TTL ran out (a crashed or frozen holder's) come back.
local function prune(k)
  for _, token in ipairs(redis.call('ZRANGEBYSCORE', k.holders, '-inf', now)) do drop(k, token) end
end

-- Permits not held now.
local function free(k)
  local m = redis.call('HMGET', k.meta, 'limit', 'used')
  return tonumber(m[1] or '0') - tonumber(m[2] or '0')
end

-- As for locks (fence-counter.lua, put before this): max(last + 1, Redis TIME in microseconds),
-- so a counter that does not exist (the semaphore was idle and its meta expired) or lost its last
-- increments in a failover still rises.
local function grant(k, token, permits, ttl)
  local fence = nextFenceField(k.meta, 'fence')
  redis.call('ZADD', k.holders, now + ttl, token)
  -- %.0f: a 16-digit fence would be concatenated as 1.7e+15.
  redis.call('HSET', k.meta, token, string.format('%d:%.0f', permits, fence))
  redis.call('HINCRBY', k.meta, 'used', permits)
  return fence
end

-- Hands free permits to the waiters in arrival order, as many as fit; stops at the first live
-- waiter that does not fit (nobody passes it: FIFO). Entries nobody renewed are dropped (line.lua).
local function serve(k, publish)
  local left = free(k)
  while left > 0 do
    local head, entry = liveHead(k.line, k.entries, now)
    if not head then return end
    local ttl, permits = string.match(entry, '^%d+:(%d+):(%d+)$')
    permits = tonumber(permits)
    if permits > left then return end
    redis.call('ZREM', k.line, head)
    redis.call('HDEL', k.entries, head)
    local fence = grant(k, head, permits, tonumber(ttl))
    -- %.0f: a fence is a 16-digit number, which plain concatenation would round.
    redis.call(publish, k.channel, string.format('h %s %.0f %.0f %s', head, fence, now, ttl))
    left = left - permits
  end
end

-- Keys live as long as they are needed: holders and meta (limit, used, fence) until the last
-- permit expires or, while someone waits, as long as the line (both together: 'used' counts the
-- holders). An idle semaphore leaves nothing behind, so its limit may change then.
local function tidy(k, entryTtl)
  local last = redis.call('ZRANGE', k.holders, -1, -1, 'WITHSCORES')[2]
  local keep = last and (tonumber(last) - now) or 0
  if redis.call('EXISTS', k.line) == 1 then keep = math.max(keep, entryTtl * 2) end
  if keep > 0 then
    redis.call('PEXPIRE', k.holders, keep)
    redis.call('PEXPIRE', k.meta, keep)
  else
    redis.call('DEL', k.holders, k.meta)
  end
end

-- {1, fence, remaining ms} when `token` holds permits, else nil.
local function holding(k, token)
  local held = redis.call('HGET', k.meta, token)
  if not held then return nil end
  local expiry = tonumber(redis.call('ZSCORE', k.holders, token))
  return {1, tonumber(string.match(held, ':(%d+)$')), expiry - now}
end

-- ms until the earliest permit expires (when one surely comes back), -1 when none is held.
local function soonest(k)
  local first = redis.call('ZRANGE', k.holders, 0, 0, 'WITHSCORES')[2]
  return first and (tonumber(first) - now) or -1
end

local function publisher(sharded)
  return sharded == '1' and 'SPUBLISH' or 'PUBLISH'
end
