-- Parks again every visitor waiting on one instance (after its channel was subscribed again, or
-- its lease was found gone) and says where each stands; admits whoever's turn has come first.
-- KEYS: see includes/room.lua. ARGV[1] sharded, ARGV[2] instance id, ARGV[3..] visitors.
-- Returns {0} when the room is not open; else {now, next, rate, absent, at}, then two
-- entries per visitor, in ARGV order: 1, position (in line); 2, pass ms left (admitted); or 0, 0
-- (neither: it lost its place).

local s = settings()
if not s then return { 0 } end
local now = clock()
prune(s)
admit(s, '')
local reply = state(s)
for i = 3, #ARGV do
  local visitor = ARGV[i]
  local ticket = redis.call('ZSCORE', line, visitor)
  if ticket then
    park(s, visitor, ticket, ARGV[2])
    reply[#reply + 1] = 1
    reply[#reply + 1] = redis.call('ZRANK', line, visitor) + 1
  else
    local pass = tonumber(redis.call('ZSCORE', passes, visitor))
    if pass and pass > now then
      reply[#reply + 1] = 2
      reply[#reply + 1] = pass - now
    else
      reply[#reply + 1] = 0
      reply[#reply + 1] = 0
    end
  end
end
keepFor(s)
return reply
