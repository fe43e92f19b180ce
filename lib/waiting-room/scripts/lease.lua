-- Renews the lease of an instance with visitors parked in `wait`: it stands for all of them; and
-- forgets those of its visitors admitted since its last renewal (includes/room.lua).
-- KEYS: see includes/room.lua. ARGV[1] sharded, ARGV[2] instance id.
-- Returns {0} when the room is not open; else {now, next, rate, absent, at, held}, held 0 when the
-- lease had run out and was recovered (its visitors must be parked again: presence.lua).

local s = settings()
if not s then return { 0 } end
prune(s)
-- XX CH: 1 when the lease was there (and is renewed: its expiry moves on), 0 when it had run out.
local held = redis.call('ZADD', leases, 'XX', 'CH', clock() + s.absent, ARGV[2]) == 1
if held then
  redis.call('PEXPIRE', parkedSet(ARGV[2]), s.absent * 2)
  forgetAdmitted(s, ARGV[2])
  keepFor(s)
end
local reply = state(s)
reply[6] = held and 1 or 0
return reply
