-- Whether a visitor holds a pass of the room now.
-- KEYS: see includes/room.lua. ARGV[1] sharded, ARGV[2] visitor.
-- Returns the pass's ms left, or 0 without one.

local pass = tonumber(redis.call('ZSCORE', passes, ARGV[2]))
if pass and pass > clock() then return pass - clock() end
return 0
