-- Counts the tasks of a queue by state, at one instant.
--
-- KEYS[1] due       zset: id -> due time (ms) of tasks without priority or group
-- KEYS[2] leased    zset: id -> lease expiry (ms)
-- KEYS[3] dead      zset: id -> time of death (ms)
-- KEYS[4] pending   zset: id -> due time of delayed tasks with a priority or a group
-- KEYS[5] prio      zset: ready tasks with a priority
-- KEYS[6] gtasks    zset: ready grouped tasks
-- KEYS[7] config    hash: 'paused' -> '1' while paused
-- KEYS[8] done      zset: completed tasks kept
-- KEYS[9] cancelled zset: cancelled tasks kept
-- KEYS[10] wchildren zset: flow parents in waiting-children
-- KEYS[11] expired   zset: expired tasks kept
--
-- Returns {ready, delayed, leased, dead, paused, completed, cancelled, waitingChildren, expired}:
-- ready = due <= now,
-- delayed = due > now; leased includes expired leases that no claim has returned yet; paused is 1
-- or 0; completed counts the kept ones.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {
  redis.call('ZCOUNT', KEYS[1], '-inf', now) + redis.call('ZCARD', KEYS[5])
    + redis.call('ZCARD', KEYS[6]) + redis.call('ZCOUNT', KEYS[4], '-inf', now),
  redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') + redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf'),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
  redis.call('HGET', KEYS[7], 'paused') == '1' and 1 or 0,
  redis.call('ZCARD', KEYS[8]),
  redis.call('ZCARD', KEYS[9]),
  redis.call('ZCARD', KEYS[10]),
  redis.call('ZCARD', KEYS[11]),
}
