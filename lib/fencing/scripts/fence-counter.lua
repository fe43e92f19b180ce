-- Fence counters, shared by the lock and semaphore scripts: put before each script that hands
-- out fences when it is loaded (LuaScript preludes), so every script is one EVAL body.
--
-- A counter that does not exist (new, or removed after its idle TTL) starts at Redis TIME in
-- microseconds: above every fence it handed out before, as long as fewer than one fence per
-- microsecond was handed out since it was created (Redis cannot run scripts that fast) and the
-- Redis clock did not go back by more than the counter's TTL (docs/locks.md, "Fences").

-- The first value of a new counter: Redis TIME in microseconds, as a string (a 16-digit number
-- that Lua would print as 1.7e+15).
local function fenceSeed()
  local t = redis.call('TIME')
  return t[1] .. string.sub('00000' .. t[2], -6)
end

-- The next fence of the string counter `key`; a new counter lives `ttl` ms.
local function nextFence(key, ttl)
  local f = redis.call('INCR', key)
  if f ~= 1 then return f end
  local seed = fenceSeed()
  redis.call('SET', key, seed, 'PX', ttl)
  return tonumber(seed)
end
