-- Releases the locks a token holds. A lock whose value carries the waiters' mark ('*') goes
-- straight to the first live waiter in its line: a fair one ('h' entry) owns it as soon as this
-- script ends and learns so from the message, which saves it a round trip and leaves no gap in
-- which a newcomer could barge in; a non-fair one ('w' entry) is only woken to race for it. A lock
-- without the mark has nobody waiting: it is deleted and nothing is published. (handOver is in
-- hand-over.lua, put before this with fence-counter.lua and lib/waiting/scripts/line.lua.) The
-- fast path, one lock that nobody waits for, is release-fast.lua, put before all of them
-- (lock-scripts.ts) so that a call it answers does not set them up; it defines `token` and
-- `first` (the lock's value, when it read it) for this file.
--
-- KEYS, 2 per lock: value, fence (as in acquire.lua); its line, entries and pub/sub channel are
-- named after the value key (lock-keys.lua, put before this and release-fast.lua)
-- ARGV[1] token
-- ARGV[2] sharded   '1': publish with SPUBLISH (Cluster), else PUBLISH
-- ARGV[3] fenceTtl  ms a newly created fence counter lives (fence-counter.lua, put before this)
-- ARGV[4] rejoin    '' or, for a single lock, a token that takes a place at the end of the line
--                   after the release (a process whose own callers still wait; see docs/locks.md)
-- ARGV[5] entry     with rejoin: "ttlMs:fencing:mode" of its entry
-- ARGV[6] entryTtl  with rejoin: ms its entry stays live without renewal
--
-- Publishes, for each released lock, either on the waiter channel of <token> (the lock's channel
-- and ':' and the token's instance tag, waiterChannel in hand-over.lua)
--   'h <token> <fence> <nowMs> <ttlMs> <others>'  handed to the fair waiter <token>,
--   'w <token>'                                   free; wakes the non-fair waiter <token>,
-- or on the lock's channel
--   'f'                                           free, nobody live was in line (wakes watchers).
-- Returns the number of locks that were held by ARGV[1] (and are released now); with rejoin,
-- {released, rejoined, fence, nowMs}: rejoined = 1 when the rejoin token stands in line, 2 when
-- nobody else was waiting and it was granted the lock at once (then fence is its fence); nowMs
-- dates a later handoff message to it.

local publish = ARGV[2] == '1' and 'SPUBLISH' or 'PUBLISH'
local fenceTtl = ARGV[3]
local rejoin = ARGV[4] or ''
local released = 0

local rejoined = 0
for i = 0, #KEYS / 2 - 1 do
  local value, fence = KEYS[i * 2 + 1], KEYS[i * 2 + 2]
  local v = first or redis.call('GET', value)
  if v == token then
    released = released + 1
    redis.call('DEL', value)
  elseif v == token .. '*' then
    released = released + 1
    local channel = value .. RELEASED
    local line, entries = value .. LINE, value .. ENTRIES
    if not handOver(value, fence, line, entries, channel, publish, fenceTtl, clock()) then
      redis.call('DEL', value)
      redis.call(publish, channel, 'f')
    end
  end
end

if rejoin == '' then return released end
if released == 0 then
  -- The rejoin token in place: the same call ran before (ioredis sends a command again when its
  -- connection closed before the reply; a promoted replica may have run the first). The token is
  -- fresh for every rejoin: answer as that run did, or as the lock's handoff to it since.
  local v = redis.call('GET', KEYS[1])
  if v == rejoin or v == rejoin .. '*' then
    local fencing = string.match(ARGV[5], '^%d+:(%d)')
    return {1, 2, fencing == '1' and lastFence(KEYS[2]) or 0, clock()}
  end
  if redis.call('ZSCORE', KEYS[1] .. LINE, rejoin) then return {1, 1, 0, clock()} end
end
if released == 1 then
  local value, fence = KEYS[1], KEYS[2]
  local line, entries = value .. LINE, value .. ENTRIES
  local ttl, fencing = string.match(ARGV[5], '^(%d+):(%d)')
  if redis.call('EXISTS', value) == 0 and redis.call('EXISTS', line) == 0 then
    -- Nobody else waits any more: the rejoining process keeps the lock.
    redis.call('SET', value, rejoin, 'PX', ttl)
    return {released, 2, fencing == '1' and nextFence(fence, fenceTtl) or 0, clock()}
  end
  joinLine(line, entries, rejoin, ARGV[5], tonumber(ARGV[6]), clock())
  markWaited(value, redis.call('GET', value))
  rejoined = 1
end
return {released, rejoined, 0, clock()}
