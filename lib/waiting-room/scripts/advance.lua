-- Admits whoever's turn has come (run by an instance when, by the room's state, the first of its
-- waiting visitors is due). Absent visitors are dropped by the other scripts (a join, an
-- instance's lease renewal every absent / 3), not here: this one runs several times a second.
-- KEYS: see includes/room.lua. ARGV[1] sharded.
-- Returns {0} when the room is not open; else {now, next, rate, head ticket, absent}.

local s = settings()
if not s then return { 0 } end
admit(s)
return state(s)
