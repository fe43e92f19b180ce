-- Local handoff inside a process's cohort: the holder's token passes the lock to the next caller
-- of the same process, with that caller's own token, full TTL and a new, larger fence, in one
-- round trip and without waking anyone. It also tells whether other processes wait in line, so
-- that the process can bound how often it bypasses them (maxLocalHandoffs).
--
-- KEYS[1] value, KEYS[2] fence, KEYS[3] line, KEYS[4] entries (as in acquire.lua)
-- ARGV[1] old token (the holder), ARGV[2] new token, ARGV[3] ttl ms, ARGV[4] fencing '1'|'0',
-- ARGV[5] fenceTtl ms (as in acquire.lua)
-- Returns {1, others, fence} when handed over (others = 1 when a live waiter of another process
-- is in line), {0} when the old token does not hold the lock any more (nothing changed).

local value, fence, line, entries = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local v = redis.call('GET', value)
local old = ARGV[1]
if v ~= old and v ~= old .. '*' then
  -- Held by the new token: the same call ran before (ioredis sends a command again when its
  -- connection closed before the reply; after a failover the promoted replica may have run it).
  if v == ARGV[2] or v == ARGV[2] .. '*' then
    return {1, v == ARGV[2] and 0 or 1, ARGV[4] == '1' and lastFence(fence) or 0}
  end
  return {0}
end

local others = 0
if v ~= old then
  -- Marked: someone joined the line; check that a live waiter is still there (liveHead:
  -- lib/waiting/scripts/line.lua).
  if liveHead(line, entries, clock()) then others = 1 end
end
redis.call('SET', value, others == 1 and ARGV[2] .. '*' or ARGV[2], 'PX', ARGV[3])

return {1, others, ARGV[4] == '1' and nextFence(fence, ARGV[5]) or 0}
