-- Quorum mode (Redlock), on one node: takes one or more locks for one token, all or nothing, and
-- with fencing hands out this node's next fence of each (nextFence, fence-counter.lua, put before
-- this with lib/waiting/scripts/line.lua for clock and mark-waited.lua for markWaited). No line:
-- quorum locks are not fair.
--
-- KEYS, 2 per lock: value (string: holder token, PX ttl; a trailing '*' marks "someone waits"),
--                   fence (this node's fence counter of the lock)
-- ARGV[1] token     fresh random value of this attempt
-- ARGV[2] ttl       lock TTL in ms
-- ARGV[3] flags     2 characters: 1. fencing: '1' takes the next fence of each lock, '0' does not;
--                   2. wait: 'm' marks the blocking lock (so that its release announces itself),
--                   '0' does not
-- ARGV[4] fenceTtl  ms a newly created fence counter lives
--
-- Returns {1, nowMs, fence_1, ..., fence_n} when granted (fence 0 when fencing is off);
--         {0, nowMs, wait} when a lock is held: wait = its holder's PTTL (-1 without TTL).
-- nowMs is this node's Redis TIME in ms (rounded down), read while the script ran: the client pairs
-- it with the moment the reply arrived to map its own clock to this node's (quorum-clocks.ts), so
-- that a relock it sends later carries a deadline on this node's clock (extend-or-relock.lua).

local token, flags = ARGV[1], ARGV[3]
local nowMs = clock()
local n = #KEYS / 2
local fencing = string.sub(flags, 1, 1) == '1'

for i = 0, n - 1 do
  local value = KEYS[i * 2 + 1]
  local pttl = redis.call('PTTL', value)
  if pttl ~= -2 then
    local v = redis.call('GET', value)
    -- The first held by this token: the same call ran before (ioredis sends a command again when
    -- its connection closed before the reply). All or nothing: all are ours, with their fences.
    if i == 0 and (v == token or v == token .. '*') then
      local result = {1, nowMs}
      for j = 0, n - 1 do
        result[j + 3] = fencing and lastFence(KEYS[j * 2 + 2]) or 0
      end
      return result
    end
    if string.sub(flags, 2, 2) == 'm' then markWaited(value, v) end
    return {0, nowMs, pttl}
  end
end
local result = {1, nowMs}
for i = 0, n - 1 do
  redis.call('SET', KEYS[i * 2 + 1], token, 'PX', ARGV[2])
  -- A number (nextFence gives digits): the client computes with the nodes' fences (raiseFences,
  -- quorum-lock-store.ts), and quorum mode is no hot path.
  result[i + 3] = fencing and tonumber(nextFence(KEYS[i * 2 + 2], ARGV[4])) or 0
end
return result
