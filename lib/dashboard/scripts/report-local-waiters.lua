-- One instance's report of its callers waiting in local cohorts for the locks a dashboard shows
-- (sent once a second by every instance with the dashboard module), and the lock names to count
-- for the next report.
--
-- KEYS[1] shown     zset: lock name -> Redis-clock ms it was last shown
-- KEYS[2] waiters   hash: instanceId -> '<ms>|<json { lock name: callers }>'
-- ARGV[1] the instanceId of the reporting instance
-- ARGV[2] its report as JSON, or '' when it has no waiting caller (its field is removed)
-- ARGV[3] age in ms past which a report is dropped (also the hash's TTL)
-- ARGV[4] how long a shown lock stays reported, in ms (show-locks.lua's ARGV[1])
-- Returns the lock names shown in the last ARGV[4] ms.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stale = tonumber(ARGV[3])
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[2], ARGV[1], now .. '|' .. ARGV[2])
  redis.call('PEXPIRE', KEYS[2], stale)
  -- Reports of instances that stopped (crashed, or shut down unreachable) go here.
  local reports = redis.call('HGETALL', KEYS[2])
  for i = 1, #reports, 2 do
    local at = tonumber(string.match(reports[i + 1], '^(%d+)|'))
    if not at or at < now - stale then redis.call('HDEL', KEYS[2], reports[i]) end
  end
end
return redis.call('ZRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[4]), '+inf')
