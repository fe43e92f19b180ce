-- Deletes finished tasks of one state (completed, dead, cancelled or expired) that finished at least
-- `olderThanMs` ago, with everything stored about them: one bounded chunk per call (the caller
-- loops until `next` is -1). Each deleted task writes a `removed` event.
--
-- KEYS[1]  set       zset of the state: done (id -> end of its keep window), dead, cancelled or
--                    expired (id -> time of death, cancel or expiry)
-- KEYS[2]  events    stream: the queue's events (includes/events.lua)
-- KEYS[3..] the hashes that hold a task's data (payload, attempts, info, errors, results,
--           progress, opts, logs, dnext, flow, parents: taskHashes in queue-store.ts); results
--           (KEYS[7]) is read for a completed task's finish time
-- ARGV[1] state       'completed', 'dead', 'cancelled' or 'expired'
-- ARGV[2] olderThanMs a task is deleted when it finished at or before Redis TIME - olderThanMs
-- ARGV[3] take        tasks to delete at most in this call (1 to 1,000)
-- ARGV[4] offset      completed only: rank in KEYS[1] to look from (0 on the first call)
-- ARGV[5] eventsMaxLen
--
-- Returns {deleted, next}: next is the offset of the next call, or -1 when nothing is left to
-- look at. Completed tasks are scanned in keep-window order (1,000 per call at most) and tested
-- by their finish time; dead, cancelled and expired ones are read by time.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cutoff = now - tonumber(ARGV[2])
local take = tonumber(ARGV[3])
local ids = {}
local nextOffset = -1
if ARGV[1] == 'completed' then
  local offset = tonumber(ARGV[4])
  local members = redis.call('ZRANGE', KEYS[1], offset, offset + CHUNK - 1)
  local scanned = 0
  for _, id in ipairs(members) do
    if #ids >= take then break end
    scanned = scanned + 1
    local finishedAt = tonumber(string.match(redis.call('HGET', KEYS[7], id) or '', '^(%d+)|')) or 0
    if finishedAt <= cutoff then ids[#ids + 1] = id end
  end
  if scanned < #members or #members == CHUNK then nextOffset = offset + scanned - #ids end
else
  ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', cutoff, 'LIMIT', 0, take)
  if #ids == take then nextOffset = 0 end
end
if #ids > 0 then
  variadic('ZREM', KEYS[1], ids)
  removeAll(ids, 3, KEYS[2], tonumber(ARGV[5]))
end
return {#ids, nextOffset}
