-- Sets a new TTL on locks, only if the token still holds every one of them.
--
-- KEYS  the value key of each lock
-- ARGV[1] token, ARGV[2] ttl in ms
-- Returns 1 when extended, 0 when at least one lock is no longer held by the token
-- (then nothing is changed). A value may carry the waiters' mark ('*', see acquire.lua).

local token, marked = ARGV[1], ARGV[1] .. '*'
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v ~= token and v ~= marked then return 0 end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
