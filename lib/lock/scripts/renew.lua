-- Renews every line entry of one process in one call (per Cluster slot), about once a second:
-- waiting costs Redis this call, whatever the number of callers waiting behind each entry. It
-- also finds entries that were handed the lock while their message was lost. (renewEntry
-- and clock are in lib/waiting/scripts/line.lua, markWaited in mark-waited.lua, put before this.)
--
-- KEYS, 4 per entry: value, fence, line, entries (as in acquire.lua)
-- ARGV[1] entryTtl ms; then 2 per entry: token, "ttlMs:fencing:mode"
-- Returns 3 numbers per entry: status, fence, pttl. Status 1: still in line (renewed); 3: still in
-- line, and the lock is free (its holder let it lapse: crashed or frozen): try now; 0: no longer
-- in line (its entry was dropped: the process must join again); 2: the token was handed the lock
-- (its message was lost): fence and pttl are the lock's.

local now = clock()
local entryTtl = tonumber(ARGV[1])
local result = {}
for i = 0, #KEYS / 4 - 1 do
  local value, fence, line, entries = KEYS[i * 4 + 1], KEYS[i * 4 + 2], KEYS[i * 4 + 3], KEYS[i * 4 + 4]
  local token = ARGV[i * 2 + 2]
  local v = redis.call('GET', value)
  local status, f, pttl = 0, 0, 0
  if v == token or v == token .. '*' then
    status = 2
    f = lastFence(fence)
    pttl = redis.call('PTTL', value)
  elseif redis.call('ZSCORE', line, token) then
    renewEntry(line, entries, token, ARGV[i * 2 + 3], entryTtl, now)
    -- The holder must know that someone waits (a grant after a lapse may have left no mark).
    markWaited(value, v)
    status = v and 1 or 3
  end
  result[i * 3 + 1] = status
  result[i * 3 + 2] = f
  result[i * 3 + 3] = pttl
end
return result
