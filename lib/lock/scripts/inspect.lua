-- Reads everything `LockService.inspect` shows of one lock, in one consistent snapshot: the
-- holder's token and PTTL, the fence counter, the shared holders (when held in shared mode) and
-- the first live entries of the line.
--
-- KEYS[1] value, KEYS[2] fence, KEYS[3] line, KEYS[4] entries (as in acquire.lua),
-- KEYS[5] shared (zset: shared holder token -> expiry ms, see acquire-shared.lua)
-- ARGV[1] how many shared holders and line entries to return at most (each)
-- Returns {value or false, pttl, fence or false, lineLength, n, shared1, ..., sharedN, token1,
-- entry1, token2, entry2, ...}: the n live shared holders (only when the value is the shared
-- sentinel), then the line in order, live entries only (an entry whose deadline passed is
-- skipped, not removed: inspection never writes); lineLength counts every member of the line.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {
  redis.call('GET', KEYS[1]),
  redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]),
  redis.call('ZCARD', KEYS[3]),
}
local max = tonumber(ARGV[1])
local holders = {}
if out[1] and string.sub(out[1], 1, 7) == '!shared' then
  holders = redis.call('ZRANGEBYSCORE', KEYS[5], now, '+inf', 'LIMIT', 0, max)
end
out[#out + 1] = #holders
for _, token in ipairs(holders) do out[#out + 1] = token end
local shown = 0
for _, token in ipairs(redis.call('ZRANGE', KEYS[3], 0, max * 2 - 1)) do
  if shown >= max then break end
  local entry = redis.call('HGET', KEYS[4], token)
  if entry and tonumber(string.match(entry, '^%d+')) >= now then
    out[#out + 1] = token
    out[#out + 1] = entry
    shown = shown + 1
  end
end
return out
