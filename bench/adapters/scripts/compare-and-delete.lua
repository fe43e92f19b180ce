-- Release of the original design's lock, with its known flaw fixed: delete the key only if it
-- still holds this owner's token (the original did GET then DEL).
--
-- KEYS[1] the lock key
-- ARGV[1] the owner's token
-- Returns 1 when the key was deleted, 0 when another owner (or nobody) holds it.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
