-- Deletes a whole queue: every task in every state, its settings (pause, global concurrency,
-- maxSize) and its event stream, then writes one `obliterated` event to the new stream. Refused
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
for i = 1, #KEYS do redis.call('UNLINK', KEYS[i]) end
emit(KEYS[2], tonumber(ARGV[2]), 'obliterated')
return {1, leased}
