-- Opens a room or changes its settings live: visitors keep their places and the admissions
-- already made stand; the next one comes one new interval after the last.
-- KEYS: see includes/room.lua. ARGV[1] sharded, ARGV[2] admitPerSecond, ARGV[3] passTtl ms,
-- ARGV[4] absent ms. Returns {now, next, rate, absent, at}. Publishes the new settings.

local rate, passTtl, absent = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now = clock()
local s = settings()
local next = now
if s and s.rate > 0 and rate > 0 then
  -- The last admission was one old interval before `next`; the next one is a new interval after it.
  next = math.max(s.next - 1000 / s.rate + 1000 / rate, now)
end
-- 'trim' 0: the next admission extends the passes' TTL to the new passTtl (includes/room.lua).
redis.call('HSET', room, 'rate', ARGV[2], 'passTtl', passTtl, 'absent', absent, 'next', fmt(next),
  'trim', 0)
s = settings()
prune(s)
admit(s, '')
publish(s, {}, '')
return state(s)
