-- Deletes a whole queue: every task in every state, its settings (pause, global concurrency,
-- maxSize) and its events, then writes one `obliterated` event to the emptied stream. Refused
-- while tasks are leased unless forced (their workers' acks then find no lease: stale).
-- UNLINK frees big keys in the background, so the call stays short whatever the queue holds.
--
-- KEYS[1]  leased    zset: id -> lease expiry (ms)
-- KEYS[2]  events    stream: the queue's events (includes/events.lua)
-- KEYS[3..] every other key of the queue (queue-keys.ts)
-- ARGV[1] force       '1': even while tasks are leased
-- ARGV[2] eventsMaxLen
--
-- Returns {done, leased}: done 0 when refused (leased tasks, none forced); leased: how many
-- tasks were leased.

local leased = redis.call('ZCARD', KEYS[1])
if leased > 0 and ARGV[1] ~= '1' then return {0, leased} end
for i = 1, #KEYS do
  -- The event stream is emptied, not deleted: it keeps the last id it gave out, so the ids of the
  -- `obliterated` event and of what follows still rise. A new stream could give the id of an
  -- event readers had already read (same millisecond), and they would miss everything up to it.
  -- It holds at most eventsMaxLen entries (~10,000): trimmed at once, it stays short.
  if i == 2 and ARGV[2] ~= '0' then
    redis.call('XTRIM', KEYS[2], 'MAXLEN', '0')
  else
    redis.call('UNLINK', KEYS[i])
  end
end
emit(KEYS[2], tonumber(ARGV[2]), 'obliterated')
return {1, leased}
