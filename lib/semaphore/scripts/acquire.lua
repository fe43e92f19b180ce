-- Acquires `permits` permits of a semaphore for one token, or puts the token in line.
--
-- KEYS   holders, meta, line, entries, channel of one semaphore (see common.lua)
-- ARGV[1] token     fresh random value of this acquisition (its place in line when waiting)
-- ARGV[2] permits   permits wanted (1..limit)
-- ARGV[3] limit     the caller's limit; stored with the semaphore while it is in use
-- ARGV[4] ttl       ms the permits live unless extended
-- ARGV[5] wait      '1': a caller that is not granted joins the line (or keeps its place);
--                   '0': it does not wait
-- ARGV[6] entryTtl  ms a line entry stays live without renewal (renew.lua)
-- ARGV[7] sharded   '1': publish grants with SPUBLISH (Cluster)
--
-- Returns {1, fence, remainingMs} when the token holds the permits (now, or handed to it while it
--         waited); {0, nowMs, soonestMs} when not (soonestMs: until the earliest held permit
--         expires, -1 if none); {-1, storedLimit} when the semaphore is in use with another limit.
-- Fast path (limit stored, nobody in line, permits free) is about 12 commands, all O(1) but the
-- prune (O(log n) for n holders).

local k = semKeys(0)
local token, permits, limit, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local entryTtl = tonumber(ARGV[6])
local stored = redis.call('HGET', k.meta, 'limit')
if stored and tonumber(stored) ~= limit then return {-1, tonumber(stored)} end
if not stored then redis.call('HSET', k.meta, 'limit', limit) end

prune(k)
-- Permits of expired holders go to those who wait first (this token among them, if in line).
serve(k, publisher(ARGV[7]))
local held = holding(k, token)
if held then
  tidy(k, entryTtl)
  return held
end
if redis.call('EXISTS', k.line) == 0 and free(k) >= permits then
  local fence = grant(k, token, permits, ttl)
  tidy(k, entryTtl)
  return {1, fence, ttl}
end
if ARGV[5] == '1' then joinLine(k.line, k.entries, token, ttl .. ':' .. permits, entryTtl, now) end
tidy(k, entryTtl)
return {0, now, soonest(k)}
