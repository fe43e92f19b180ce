-- A fence counter kept in a hash field (no TTL of its own), for the semaphore: put before its
-- scripts after fence-counter.lua (FENCE_FIELD_PRELUDES, lib/waiting/waiting-scripts.ts), whose
-- promises it keeps the same way. Its own file so that the lock scripts, which do not use it, do
-- not set it up on every call.

-- The next fence of the counter in `field` of `hash`.
local function nextFenceField(hash, field)
  local now = timeMicros()
  local last = redis.call('HGET', hash, field)
  if last and tonumber(last) >= tonumber(now) then
    return redis.call('HINCRBY', hash, field, 1)
  end
  redis.call('HSET', hash, field, now)
  return tonumber(now)
end
