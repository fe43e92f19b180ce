-- Admits whoever's turn has come (run by an instance when, by the room's state, the first of its
-- waiting visitors is due). Absent visitors are dropped by the other scripts (a join, an
-- instance's lease renewal every absent / 3), not here: this one runs several times a second.
-- KEYS: see includes/room.lua. ARGV[1] sharded, ARGV[2] the calling instance's id (published with
-- the admissions, and their time kept as 'at': includes/room.lua).
-- Returns {0} when the room is not open; else {now, next, rate, absent, at}.

local s = settings()
if not s then return { 0 } end
admit(s, ARGV[2])
return state(s)
