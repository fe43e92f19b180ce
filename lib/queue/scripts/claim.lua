-- Leases up to `count` ready tasks, lowest due time first. Expired leases are returned first
-- (to ready, or to the dead-letter set once they used up `maxAttempts`), so a crashed worker's
-- tasks come back without any janitor.
--
-- KEYS[1] due       zset: id -> due time (ms)
-- KEYS[2] leased    zset: id -> lease expiry (ms)
-- KEYS[3] payload   hash: id -> JSON payload
-- KEYS[4] attempts  hash: id -> claims so far
-- KEYS[5] tokens    hash: id -> lease token of the current lease
-- KEYS[6] dead      zset: id -> time of death (ms)
-- KEYS[7] wake      list: wake-up marker for idle workers (at most one element)
-- ARGV[1] count        tasks to lease at most (0: only return expired leases and report)
-- ARGV[2] leaseMs      lease length
-- ARGV[3] maxAttempts  an expired lease whose attempt count reached this goes to dead letter
-- ARGV[4] tokenBase    fresh random value; the lease token of the i-th task is tokenBase:i
-- ARGV[5] reclaimMax   expired leases returned per call at most
--
-- Returns {nowMs, nextMs, id_1, score_1, attempt_1, token_1, payload_1, ...}: nextMs is the
-- earliest due time or lease expiry still ahead (nowMs when ready tasks remain, -1 when the queue
-- is empty); a payload is false when the task has none.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local count = tonumber(ARGV[1])
local leaseMs = tonumber(ARGV[2])
local maxAttempts = tonumber(ARGV[3])

local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[5], id)
  if tonumber(redis.call('HGET', KEYS[4], id) or '0') >= maxAttempts then
    redis.call('ZADD', KEYS[6], now, id)
  else
    redis.call('ZADD', KEYS[1], now, id)
  end
end

local result = {now, -1}
if count > 0 then
  local ready = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, count)
  for i = 1, #ready, 2 do
    local id = ready[i]
    local token = ARGV[4] .. ':' .. ((i + 1) / 2)
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZADD', KEYS[2], now + leaseMs, id)
    redis.call('HSET', KEYS[5], id, token)
    result[#result + 1] = id
    result[#result + 1] = ready[i + 1]
    result[#result + 1] = redis.call('HINCRBY', KEYS[4], id, 1)
    result[#result + 1] = token
    result[#result + 1] = redis.call('HGET', KEYS[3], id)
  end
end

local nextDue = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
local nextLease = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]
local nextAt = -1
if nextDue then nextAt = math.max(tonumber(nextDue), now) end
if nextLease and (nextAt == -1 or tonumber(nextLease) < nextAt) then nextAt = tonumber(nextLease) end
result[2] = nextAt
-- Ready tasks are left (this caller had no room for them): pass the wake-up on to the next idle
-- worker, so a burst of tasks is spread over every idle worker one round trip at a time.
if nextAt ~= -1 and nextAt <= now then
  redis.call('LPUSH', KEYS[7], '1')
  redis.call('LTRIM', KEYS[7], 0, 0)
end
return result
