-- Renews every line entry of one process in one call (per Cluster slot), about once a second,
-- whatever the number of callers waiting. On the way it gives back permits whose TTL ran out
-- (a SIGKILLed holder's) and hands them to the waiters, and finds entries that were handed
-- permits while their message was lost.
--
-- KEYS   5 per entry: holders, meta, line, entries, channel of its semaphore (see common.lua)
-- ARGV[1] entryTtl ms, ARGV[2] sharded ('1': SPUBLISH); then 2 per entry: token, "ttlMs:permits"
-- Returns 3 numbers per entry: status, fence, remaining ms. Status 1: still in line (renewed);
-- 0: no longer in line (its entry was dropped: the caller must join again); 2: the token holds
-- permits (fence and remaining ms are theirs).

local entryTtl = tonumber(ARGV[1])
local publish = publisher(ARGV[2])
local result = {}
-- Entries of one semaphore share its prune, serve and tidy (done once per semaphore).
local served = {}
for i = 0, #KEYS / 5 - 1 do
  local k = semKeys(i)
  local token, spec = ARGV[i * 2 + 3], ARGV[i * 2 + 4]
  if not served[k.holders] then
    served[k.holders] = k
    prune(k)
    serve(k, publish)
  end
  local held = holding(k, token)
  local status, fence, remaining = 0, 0, 0
  if held then
    status, fence, remaining = 2, held[2], held[3]
  elseif redis.call('ZSCORE', k.line, token) then
    renewEntry(k.line, k.entries, token, spec, entryTtl, now)
    status = 1
  end
  result[i * 3 + 1] = status
  result[i * 3 + 2] = fence
  result[i * 3 + 3] = remaining
end
for _, k in pairs(served) do tidy(k, entryTtl) end
return result
