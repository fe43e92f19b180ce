-- The registry of a queue's workers on every instance (`QueueService.workers`): each instance
-- writes its workers' entries every heartbeat; an entry not written again within `ttlMs` is an
-- instance that died, and is dropped by the next call of any instance (the whole hash expires
-- `ttlMs` after the last write, when no instance is left).
--
-- KEYS[1] workers  hash: '<instanceId>#<n>' -> '<heartbeat ms>|<JSON of the worker>'
-- ARGV[1] ttlMs    an entry older than this is dropped
-- ARGV[2] mode     'beat': write ARGV[3..] (field, JSON pairs), then drop the fields
--                  listed after a '' separator (workers that closed); 'list': read only
-- ARGV[3..]        see mode
--
-- Returns {nowMs, field_1, value_1, ...}: the live entries after the call ('list' only; 'beat'
-- returns {nowMs, created}: how many of the fields written were not there, which shows the
-- writer that entries it wrote before were lost).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local out = {now}

if ARGV[2] == 'beat' then
  local i, writes, drops = 3, {}, {}
  while i <= #ARGV and ARGV[i] ~= '' do
    writes[#writes + 1] = ARGV[i]
    writes[#writes + 1] = string.format('%.0f', now) .. '|' .. ARGV[i + 1]
    i = i + 2
  end
  for j = i + 1, #ARGV do drops[#drops + 1] = ARGV[j] end
  local created = 0
  if #writes > 0 then
    created = redis.call('HSET', KEYS[1], unpack(writes))
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
  if #drops > 0 then redis.call('HDEL', KEYS[1], unpack(drops)) end
  out[2] = created
end

-- Drops the entries of dead instances (a queue has a few workers: the whole hash is read).
local all = redis.call('HGETALL', KEYS[1])
local stale = {}
for i = 1, #all, 2 do
  local at = tonumber(string.match(all[i + 1], '^(%d+)|'))
  if not at or at < now - ttl then
    stale[#stale + 1] = all[i]
  elseif ARGV[2] == 'list' then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
return out
