-- Renews the lease of an instance with visitors parked in `wait`: it stands for all of them.
-- KEYS: see includes/room.lua. ARGV[1] sharded, ARGV[2] instance id.
-- Returns {0} when the room is not open; else {now, next, rate, head ticket, absent, held}, held
-- 0 when the lease had run out and was recovered (its visitors must be parked again: presence.lua).

local s = settings()
if not s then return { 0 } end
prune(s)
local held = redis.call('ZSCORE', leases, ARGV[2])
if held then
  redis.call('ZADD', leases, clock() + s.absent, ARGV[2])
  redis.call('PEXPIRE', parkedSet(ARGV[2]), s.absent * 2)
  keepFor(s)
end
local reply = state(s)
reply[6] = held and 1 or 0
return reply
