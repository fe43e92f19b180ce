-- Looks up one task (`get`) or a page of the tasks in one state (`list`), without changing them.
--
-- KEYS[1]  due       zset: id -> due time (ms) of tasks without priority or group
-- KEYS[2]  leased    zset: id -> lease expiry (ms)
-- KEYS[3]  payload   hash: id -> JSON payload
-- KEYS[4]  attempts  hash: id -> claims so far
-- KEYS[5]  dead      zset: id -> time of death (ms)
-- KEYS[6]  info      hash: id -> 'enqueuedAt' or 'enqueuedAt|dueAt|priority|seq|group'
-- KEYS[7]  errors    hash: id -> last error message
-- KEYS[8]  pending   zset: id -> due time of delayed tasks with a priority or a group
-- KEYS[9]  prio      zset: id -> (priority + 1000) * 2^41 + seq
-- KEYS[10] gtasks    zset (all scores 0): group \0 seq(15 digits) \0 id
-- KEYS[11] done      zset: id -> end of its keepCompleted window (ms)
-- KEYS[12] cancelled zset: id -> time it was cancelled
-- KEYS[13] results   hash: id -> 'finishedAt|result JSON' of kept completed tasks
-- KEYS[14] progress  hash: id -> JSON of the last progress value
-- KEYS[15] wchildren zset: flow parent id -> children still to finish (includes/flow.lua)
-- KEYS[16] expired   zset: id -> time it expired (not started by its deadline)
-- KEYS[17] opts      hash: id -> JSON of the task's own options and name
-- ARGV[1] 'get' or 'list'
-- get:  ARGV[2] id
-- list: ARGV[2] state ('ready' | 'delayed' | 'leased' | 'completed' | 'dead' | 'cancelled' |
--       'expired' | 'waiting-children'),
--       ARGV[3] offset, ARGV[4] limit, ARGV[5] cut: a payload, result or progress longer than
--       this many bytes is sent as {its length}, a result as {'finishedAt|', its length} (0 or
--       none: whole). Reading a value into a script copies it: a page of 1 MB payloads would hold
--       the one thread of Redis for ~1.4 ms a task (HSTRLEN reads only the length)
--
-- Returns {id, state, time, attempts, payload, lastError, info, result, progress, opts, ...} per task
-- (get: one task, or an empty array when the id is unknown). time: due time (ready, delayed),
-- lease expiry (leased), finish time (completed), time of death, cancel or expiry (dead,
-- cancelled, expired) or
-- enqueue time (waiting-children).
-- result: 'finishedAt|result JSON' (completed) or false; progress, opts: JSON or false. ready lists tasks with a negative priority, then ungrouped ones by
-- due time, then positive priorities, then due delayed ones not yet moved to ready, then grouped
-- ones by group; delayed lists ungrouped tasks, then those with a priority or a group.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local PRIO_ZERO = '(' .. string.format('%.0f', 1000 * 2199023255552)
local out = {}
local cut = ARGV[1] == 'list' and tonumber(ARGV[5] or '0') or 0

local function field(key, id)
  if cut > 0 then
    local n = redis.call('HSTRLEN', key, id)
    if n > cut then return {n} end
  end
  return redis.call('HGET', key, id)
end

local function describe(id, state, time)
  local info = redis.call('HGET', KEYS[6], id)
  -- Its finish time is read from it, whatever its size.
  local result = state == 'completed' and redis.call('HGET', KEYS[13], id)
  if state == 'completed' then time = tonumber(string.match(result or '', '^(%d+)|')) or time end
  if result and cut > 0 and #result > cut then
    result = {string.match(result, '^%d*|') or '', #result}
  end
  if state == 'waiting-children' then time = tonumber(string.match(info or '', '^(%d+)')) end
  if not time then time = tonumber(string.match(info or '', '^%d+|(%d+)|')) or now end
  out[#out + 1] = id
  out[#out + 1] = state
  out[#out + 1] = time
  out[#out + 1] = tonumber(redis.call('HGET', KEYS[4], id) or '0')
  out[#out + 1] = field(KEYS[3], id)
  out[#out + 1] = redis.call('HGET', KEYS[7], id)
  out[#out + 1] = info
  out[#out + 1] = result or false
  out[#out + 1] = field(KEYS[14], id)
  out[#out + 1] = redis.call('HGET', KEYS[17], id)
end

if ARGV[1] == 'get' then
  local id = ARGV[2]
  local s = redis.call('ZSCORE', KEYS[2], id)
  if s then describe(id, 'leased', tonumber(s)) return out end
  s = redis.call('ZSCORE', KEYS[5], id)
  if s then describe(id, 'dead', tonumber(s)) return out end
  s = redis.call('ZSCORE', KEYS[11], id)
  if s then describe(id, 'completed', now) return out end
  s = redis.call('ZSCORE', KEYS[12], id)
  if s then describe(id, 'cancelled', tonumber(s)) return out end
  s = redis.call('ZSCORE', KEYS[16], id)
  if s then describe(id, 'expired', tonumber(s)) return out end
  if redis.call('ZSCORE', KEYS[15], id) then
    describe(id, 'waiting-children') return out
  end
  s = redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[8], id)
  if s then describe(id, tonumber(s) > now and 'delayed' or 'ready', tonumber(s)) return out end
  if redis.call('ZSCORE', KEYS[9], id) then describe(id, 'ready') return out end
  local m = parseInfo(redis.call('HGET', KEYS[6], id))
  if m and m.group ~= '' and redis.call('ZSCORE', KEYS[10], groupMember(m.group, m.seq, id)) then
    describe(id, 'ready')
  end
  return out
end

-- A state's tasks are the concatenation of segments: {key, min, max, usesScore}; gtasks is read
-- by rank (its members carry the id after the group and sequence).
local state = ARGV[2]
local segments
if state == 'ready' then
  segments = {
    {KEYS[9], '-inf', PRIO_ZERO, false}, {KEYS[1], '-inf', now, true},
    {KEYS[9], PRIO_ZERO, '+inf', false}, {KEYS[8], '-inf', now, true}, {KEYS[10]},
  }
elseif state == 'delayed' then
  segments = {{KEYS[1], '(' .. now, '+inf', true}, {KEYS[8], '(' .. now, '+inf', true}}
elseif state == 'leased' then
  segments = {{KEYS[2], '-inf', '+inf', true}}
elseif state == 'completed' then
  segments = {{KEYS[11], '-inf', '+inf', false}}
elseif state == 'cancelled' then
  segments = {{KEYS[12], '-inf', '+inf', true}}
elseif state == 'expired' then
  segments = {{KEYS[16], '-inf', '+inf', true}}
elseif state == 'waiting-children' then
  segments = {{KEYS[15], '-inf', '+inf', false}}
else
  segments = {{KEYS[5], '-inf', '+inf', true}}
end
local offset = tonumber(ARGV[3])
local left = tonumber(ARGV[4])
for _, seg in ipairs(segments) do
  if left <= 0 then break end
  local size = seg[2] and redis.call('ZCOUNT', seg[1], seg[2], seg[3]) or redis.call('ZCARD', seg[1])
  if offset >= size then
    offset = offset - size
  else
    local take = math.min(left, size - offset)
    if seg[2] then
      local r = redis.call('ZRANGEBYSCORE', seg[1], seg[2], seg[3], 'WITHSCORES', 'LIMIT', offset, take)
      for i = 1, #r, 2 do describe(r[i], state, seg[4] and tonumber(r[i + 1]) or nil) end
    else
      for _, m in ipairs(redis.call('ZRANGE', seg[1], offset, offset + take - 1)) do
        describe(string.match(m, '^.-%z%d+%z(.*)$'), state)
      end
    end
    left = left - take
    offset = 0
  end
end
return out
