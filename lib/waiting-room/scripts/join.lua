-- Puts a visitor in line (or keeps its place: a visitor already in line is only marked seen),
-- admits whoever's turn has come, and says where the visitor stands.
-- KEYS: see includes/room.lua. ARGV[1] sharded, ARGV[2] visitor, ARGV[3] instance id ('' for a
-- plain join; else the visitor is parked on that instance, which then waits for it).
-- Returns {0} when the room is not open; else {now, next, rate, absent, at, admitted (1/0), pass
-- ms left (admitted) or position (1 = next in line), ticket (0 when admitted)}.

local visitor, instance = ARGV[2], ARGV[3]
local s = settings()
if not s then return { 0 } end
local now = clock()
prune(s)
local pass = tonumber(redis.call('ZSCORE', passes, visitor))
if not pass or pass <= now then
  local ticket = tonumber(redis.call('ZSCORE', line, visitor))
  local fresh = not ticket
  if fresh then
    -- First time, or again after its pass expired: it joins at the end.
    if pass then redis.call('ZREM', passes, visitor) end
    ticket = redis.call('HINCRBY', room, 'seq', 1)
    s.seq = ticket
    redis.call('ZADD', line, ticket, visitor)
  end
  local on = (fresh or instance == '') and redis.call('HGET', parkedBy, visitor)
  if on and fresh then
    -- Parked before its last admission (not yet forgotten, includes/room.lua): that is over.
    unparkAll({ visitor })
    on = nil
  end
  if instance == '' and not on then redis.call('ZADD', seen, now, visitor) end
  keepFor(s)
  admit(s, '')
  if instance ~= '' then
    -- Parked only when it still waits: one admitted at once leaves nothing behind, and the
    -- instance's visitors admitted since its last call are forgotten here (not only by its lease
    -- renewals, which stop whenever its line empties).
    forgetAdmitted(s, instance)
    if ticket > s.cursor then park(s, visitor, ticket, instance) end
  end
  -- Everyone in line has a ticket above the cursor (the last one admitted).
  if ticket > s.cursor then
    local reply = state(s)
    reply[6] = 0
    reply[7] = redis.call('ZRANK', line, visitor) + 1
    reply[8] = ticket
    return reply
  end
  pass = now + s.passTtl
end
local reply = state(s)
reply[6] = 1
reply[7] = pass - now
reply[8] = 0
return reply
