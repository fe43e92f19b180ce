-- Claims one tick of a scheduled job for the calling instance (see docs/schedule.md).
--
-- KEYS[1] ticks  hash of the job: 't:<tick>' -> 's <token> <leaseUntil>' (claimed, starting)
--                                   or 'r <token>' (started); 'last' -> newest interval window
-- ARGV[1] mode        'at'    (cron: ARGV[2] is the tick, a scheduled time in ms)
--                     'every' (interval: ARGV[2] '' picks the window here from Redis TIME, or
--                              names a window to retry)
--                     'once'  (timeout: ARGV[2] is '0'; one claim per keepMs)
-- ARGV[2] tick        see mode
-- ARGV[3] periodMs    'every': window length
-- ARGV[4] earlyMs     'every': a window may be claimed this long before it opens
-- ARGV[5] token       the claiming instance's random token
-- ARGV[6] startMs     lease of a claim that is not started yet ('starting' lease)
-- ARGV[7] keepMs      how long the hash lives after a new claim; 'at': older ticks are refused
-- ARGV[8] keepTicks   fields of ticks older than tick - keepTicks are deleted on a new claim
--
-- Returns {claimed, tick, waitMs}: claimed 1 (the caller must run start-tick.lua, then the
-- handler); or 0 with waitMs -1 (the tick was started elsewhere, or is too old) or waitMs > 0
-- (another instance claimed it and has not started yet: retry after waitMs, and take it over if
-- it never starts).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local mode = ARGV[1]
local tick = ARGV[2]
local token = ARGV[5]
local startMs = tonumber(ARGV[6])
local keepMs = tonumber(ARGV[7])
local computed = false

local function state(ofTick)
  local st = redis.call('HGET', KEYS[1], 't:' .. ofTick)
  if not st then return nil end
  local kind, owner, untilMs = string.match(st, '^(%a) (%S+) ?(%d*)$')
  return { kind = kind, owner = owner, untilMs = tonumber(untilMs) }
end

if mode == 'every' and tick == '' then
  local period = tonumber(ARGV[3])
  local current = math.floor((now + tonumber(ARGV[4])) / period)
  local last = tonumber(redis.call('HGET', KEYS[1], 'last'))
  computed = true
  if not last or last < current - 2 then
    -- First claim, or no instance fired for two windows: the missed windows are skipped.
    tick = string.format('%d', current)
  else
    local ls = state(string.format('%d', last))
    if last >= current or (ls and ls.kind == 's' and now >= ls.untilMs) then
      -- Nothing new yet, or the newest window's claimer never started it: look at that one.
      tick = string.format('%d', last)
      computed = false
    else
      -- Up to one window late: an instance whose interval drifted past a window's end still
      -- runs it, so a single instance never loses a firing.
      tick = string.format('%d', last + 1)
    end
  end
end

local st = state(tick)
if not st then
  if mode == 'every' and not computed then return { 0, tick, -1 } end
  if mode == 'at' and tonumber(tick) < now - keepMs then return { 0, tick, -1 } end
  redis.call('HSET', KEYS[1], 't:' .. tick, 's ' .. token .. ' ' .. (now + startMs))
  if mode == 'every' then redis.call('HSET', KEYS[1], 'last', tick) end
  redis.call('PEXPIRE', KEYS[1], keepMs)
  local oldest = tonumber(tick) - tonumber(ARGV[8])
  for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
    if field ~= 'last' and tonumber(string.sub(field, 3)) < oldest then
      redis.call('HDEL', KEYS[1], field)
    end
  end
  return { 1, tick, 0 }
end
if st.kind == 'r' then return { 0, tick, -1 } end
if st.owner == token then return { 1, tick, 0 } end
if now < st.untilMs then return { 0, tick, st.untilMs - now } end
-- Claimed, but its claimer did not start it within its lease (it died): take it over.
redis.call('HSET', KEYS[1], 't:' .. tick, 's ' .. token .. ' ' .. (now + startMs))
if mode == 'every' and (tonumber(redis.call('HGET', KEYS[1], 'last')) or -1) < tonumber(tick) then
  redis.call('HSET', KEYS[1], 'last', tick)
end
return { 1, tick, 0 }
