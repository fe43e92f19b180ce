-- Puts a visitor in line (or keeps its place: a visitor already in line is only marked seen),
-- admits whoever's turn has come, and says where the visitor stands.
-- KEYS: see includes/room.lua. ARGV[1] sharded, ARGV[2] visitor, ARGV[3] instance id ('' for a
-- plain join; else the visitor is parked on that instance, which then waits for it).
-- Returns {0} when the room is not open; else {now, next, rate, head ticket, absent, admitted (1/0),
-- pass ms left (admitted) or position (1 = next in line), ticket (0 when admitted)}.

local visitor = ARGV[2]
local s = settings()
if not s then return { 0 } end
local now = clock()
prune(s)
local pass = tonumber(redis.call('ZSCORE', passes, visitor))
if pass and pass <= now then
  -- Its pass expired: it joins again, at the end.
  redis.call('ZREM', passes, visitor)
  pass = nil
end
if not pass then
  local ticket = redis.call('ZSCORE', line, visitor)
  if not ticket then
    ticket = redis.call('HINCRBY', room, 'seq', 1)
    redis.call('ZADD', line, ticket, visitor)
    lineChanged()
  end
  if ARGV[3] ~= '' then
    park(s, visitor, ARGV[3])
  elseif not redis.call('HGET', parkedBy, visitor) then
    redis.call('ZADD', seen, now, visitor)
  end
  keepFor(s)
  admit(s)
  pass = tonumber(redis.call('ZSCORE', passes, visitor))
  if not pass then
    local reply = state(s)
    reply[6] = 0
    reply[7] = redis.call('ZRANK', line, visitor) + 1
    reply[8] = tonumber(ticket)
    return reply
  end
end
local reply = state(s)
reply[6] = 1
reply[7] = pass - now
reply[8] = 0
return reply
