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
-- Only UNLINK, then one XADD: commands every queue script uses, so a user that may run the others
-- may run this one and it cannot be refused halfway (Redis does not undo what a failed script
-- did: an XTRIM, which the documented ACL leaves out, once failed after the leased set was gone).
-- The XADD comes last so that a full Redis (noeviction) still lets a queue be deleted: UNLINK,
-- the first write, is not refused for OOM, and then nothing after it is.
for i = 1, #KEYS do
  if i ~= 2 or ARGV[2] == '0' then redis.call('UNLINK', KEYS[i]) end
end
-- The event stream is emptied, not deleted: it keeps the last id it gave out, so the ids of the
-- `obliterated` event and of what follows still rise. A new stream could give the id of an
-- event readers had already read (same millisecond), and they would miss everything up to it.
-- An exact MAXLEN 1 keeps the new event alone; the stream holds at most eventsMaxLen entries
-- (~10,000), so it stays short.
if ARGV[2] ~= '0' then
  redis.call('XADD', KEYS[2], 'MAXLEN', '1', '*', 't', 'obliterated')
end
return {1, leased}
