-- A dashboard refresh listed these held locks: marks them shown, so that every instance reports
-- its callers waiting for them (report-local-waiters.lua), and returns the live reports.
--
-- KEYS[1] shown     zset: lock name -> Redis-clock ms it was last shown
-- KEYS[2] waiters   hash: instanceId -> '<ms>|<json { lock name: callers }>'
-- ARGV[1] how long a shown lock stays reported, in ms (also the zset's TTL)
-- ARGV[2] how many lock names the zset keeps at most (the most recently shown)
-- ARGV[3] age in ms past which a report is ignored (its instance stopped reporting)
-- ARGV[4..] the lock names shown
-- Returns {instanceId, json, instanceId, json, ...} of the reports younger than ARGV[3].

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local keep = tonumber(ARGV[1])
for i = 4, #ARGV, 500 do
  local args = {}
  for j = i, math.min(i + 499, #ARGV) do
    args[#args + 1] = now
    args[#args + 1] = ARGV[j]
  end
  redis.call('ZADD', KEYS[1], unpack(args))
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - keep)
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -tonumber(ARGV[2]) - 1)
redis.call('PEXPIRE', KEYS[1], keep)

local live = {}
local stale = now - tonumber(ARGV[3])
local reports = redis.call('HGETALL', KEYS[2])
for i = 1, #reports, 2 do
  local report = reports[i + 1]
  local bar = string.find(report, '|', 1, true)
  if bar and tonumber(string.sub(report, 1, bar - 1)) >= stale then
    live[#live + 1] = reports[i]
    live[#live + 1] = string.sub(report, bar + 1)
  end
end
return live
