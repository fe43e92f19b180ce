-- Fence counters, shared by the lock and semaphore scripts: put before each script that hands
-- out fences when it is loaded (LuaScript preludes), so every script is one EVAL body.
--
-- A fence is max(last fence + 1, Redis TIME in microseconds). Both halves matter:
-- - the `+ 1` keeps fences strictly rising on one server, whatever its clock does meanwhile;
-- - the clock keeps them rising where the counter alone cannot: a counter that does not exist
--   (new, or removed after its idle TTL) starts above every fence handed out before, and so does
--   a replica promoted by a failover that lost the old master's last increments (replication is
--   asynchronous) — as long as fewer than one fence per microsecond was handed out (Redis cannot
--   run scripts that fast) and the clock of the server that hands out the next fence is not
--   behind the clock of the one that handed out the last by more than the time between the two
--   (docs/locks.md, "Fences").
--
-- Functions (no KEYS or ARGV of their own; return values below):
--   nextFence(key, ttl, seed)   the next fence of the string counter `key` (a new counter lives
--                               `ttl` ms); returns it as a string of digits, which the client
--                               reads as a number (a number made in Lua from a string costs the
--                               server ~2,200 instructions: strtod). `seed`: Redis TIME in
--                               microseconds as a string (timeMicros, lib/redis/scripts/
--                               time-micros.lua), when the script has read it already (clockMicros(),
--                               lib/waiting/scripts/line.lua); else it is read
--   lastFence(key)              the string counter's value as a number (0 when it is gone): the
--                               fence the last grant handed out, for a grant found again (a
--                               lock handed over while its taker waited, a call run twice)

-- The next fence of the string counter `key`; a new counter lives `ttl` ms. The usual case (the
-- clock is ahead of the counter) is TIME + one SET that also reads the old value (Redis 6.2+).
-- Counter and clock are compared as what they are, decimal integers without leading zeros: the
-- longer is larger, and of two as long the one that sorts later.
local function nextFence(key, ttl, seed)
  local now = seed or timeMicros()
  local last = redis.call('SET', key, now, 'KEEPTTL', 'GET')
  if not last then
    redis.call('PEXPIRE', key, ttl)
  elseif #last > #now or (#last == #now and last >= now) then
    -- The counter was ahead of the clock (several fences in one microsecond, or the clock went
    -- back): one above it, and never the clock's lower value.
    local f = string.format('%.0f', tonumber(last) + 1)
    redis.call('SET', key, f, 'KEEPTTL')
    return f
  end
  return now
end

-- The fence the string counter `key` handed out last (0: none, or the counter is gone).
local function lastFence(key)
  return tonumber(redis.call('GET', key) or '0')
end
