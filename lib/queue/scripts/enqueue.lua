-- Adds tasks to a queue, each id at most once.
--
-- KEYS[1] due       zset: id -> due time (ms); ready when due <= now, delayed otherwise
-- KEYS[2] leased    zset: id -> lease expiry (ms)
-- KEYS[3] payload   hash: id -> JSON payload
-- KEYS[4] attempts  hash: id -> claims so far
-- KEYS[5] dead      zset: id -> time of death (ms)
-- KEYS[6] wake      list: wake-up marker for idle workers (at most one element)
-- ARGV[1] delayMs     due time = Redis TIME + delayMs
-- ARGV[2] replace     '1': an id already due (not leased) gets the new due time (and payload)
-- ARGV[3] hasPayload  '1': ARGV[4] is the payload of every id
-- ARGV[4] payload     JSON text ('' when hasPayload is '0')
-- ARGV[5..] ids
--
-- Returns the number of ids newly added. A leased id is never touched. A dead id is added again
-- as a new task (out of the dead-letter set, attempts reset).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = now + tonumber(ARGV[1])
local replace = ARGV[2] == '1'
local hasPayload = ARGV[3] == '1'
local added = 0
local changed = false

for i = 5, #ARGV do
  local id = ARGV[i]
  if not redis.call('ZSCORE', KEYS[2], id) then
    if redis.call('ZSCORE', KEYS[1], id) then
      if replace then
        redis.call('ZADD', KEYS[1], due, id)
        if hasPayload then redis.call('HSET', KEYS[3], id, ARGV[4]) end
        changed = true
      end
    else
      redis.call('ZREM', KEYS[5], id)
      redis.call('HDEL', KEYS[4], id)
      if hasPayload then
        redis.call('HSET', KEYS[3], id, ARGV[4])
      else
        redis.call('HDEL', KEYS[3], id)
      end
      redis.call('ZADD', KEYS[1], due, id)
      added = added + 1
      changed = true
    end
  end
end

-- Idle workers block on this list; one marker wakes one of them, and claim.lua passes it on
-- while ready tasks remain. Delayed tasks wake them too, so they can shorten their wait.
if changed then
  redis.call('LPUSH', KEYS[6], '1')
  redis.call('LTRIM', KEYS[6], 0, 0)
end
return added
