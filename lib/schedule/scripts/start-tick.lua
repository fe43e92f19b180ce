-- Marks a claimed tick as started, if the claim is still the caller's.
--
-- KEYS[1] ticks  hash of the job (see claim-tick.lua)
-- ARGV[1] tick
-- ARGV[2] token  the token the tick was claimed with
--
-- Returns 1 when the tick is now started by the caller (it must run the handler), 0 when its
-- claim lapsed and another instance took it over (the caller must not run it). A started tick is
-- never claimed again.

local field = 't:' .. ARGV[1]
local st = redis.call('HGET', KEYS[1], field)
if st and string.sub(st, 1, #ARGV[2] + 3) == 's ' .. ARGV[2] .. ' ' then
  redis.call('HSET', KEYS[1], field, 'r ' .. ARGV[2])
  return 1
end
-- Started by this token: the same call ran before (ioredis sends a command again when its
-- connection closed before the reply; after a failover the promoted replica may have run it). The
-- token is fresh for every run, so the caller still runs the handler, once.
if st == 'r ' .. ARGV[2] then return 1 end
return 0
