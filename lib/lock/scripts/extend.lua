-- Sets a new TTL on locks, only if the token still holds every one of them.
--
-- KEYS  the value key of each lock
-- ARGV[1] token, ARGV[2] ttl in ms
-- Returns 1 when extended, 0 when at least one lock is no longer held by the token
-- (then nothing is changed).

for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
