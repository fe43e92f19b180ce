-- Appends one line to a leased task's log (`task.log(line)`), if the lease token is still
-- current, keeping only the last `maxLines` lines; writes a `log` event.
--
-- KEYS[1] tokens  hash: id -> lease token of the current lease
-- KEYS[2] logs    hash: id -> the task's log: its lines, each as JSON text, one per line ('\n')
-- KEYS[3] events  stream: the queue's events (includes/events.lua)
-- ARGV[1] id
-- ARGV[2] token   the lease token of the caller
-- ARGV[3] line    the line as JSON text (no raw newline)
-- ARGV[4] maxLines
-- ARGV[5] eventsMaxLen
--
-- Returns the number of lines kept, or 0 when the token is stale (nothing changes).

local id = ARGV[1]
if redis.call('HGET', KEYS[1], id) ~= ARGV[2] then return 0 end
local v = redis.call('HGET', KEYS[2], id)
v = v and (v .. '\n' .. ARGV[3]) or ARGV[3]
local _, breaks = string.gsub(v, '\n', '\n')
local n = breaks + 1
local maxLines = tonumber(ARGV[4])
while n > maxLines do
  v = string.sub(v, string.find(v, '\n', 1, true) + 1)
  n = n - 1
end
redis.call('HSET', KEYS[2], id, v)
emit(KEYS[3], tonumber(ARGV[5]), 'log', id)
return n
