-- Quorum mode, on one node: extends locks the token still holds and, when asked to, locks again
-- those this node lost (a restart without persistence, an expiry while the node was unreachable),
-- so that the node counts toward the majority again.
--
-- KEYS  the value key of each lock
-- ARGV[1] token, ARGV[2] ttl in ms,
-- ARGV[3] relock  '1': SET NX PX the missing locks (sent only while the lock is surely still
--                 valid, when no one else can hold a majority); '0': only extend
-- Returns 1 when every lock was held by the token and is extended; 2 when at least one was
-- missing and was locked again (the others extended); 0 when at least one is held by another
-- token, or is missing and relock is '0' (then nothing is changed).

local relock = ARGV[3] == '1'
local missing = false
for i = 1, #KEYS do
  local value = redis.call('GET', KEYS[i])
  if not value then
    if not relock then return 0 end
    missing = true
  elseif value ~= ARGV[1] then
    return 0
  end
end
for i = 1, #KEYS do
  if not redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
if missing then return 2 end
return 1
