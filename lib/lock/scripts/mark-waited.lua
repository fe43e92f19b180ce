-- Marking a lock's holder as waited for: put before each lock script that joins a line or waits
-- outside one (lock-scripts.ts). Its own file so that acquire.lua, which never hands a lock over,
-- does not set up hand-over.lua's helpers on every call.

-- Marks `v`, the value of lock `value` (its holder's token, or nil when free), with '*': the
-- holder's release then hands the lock over or wakes the line.
local function markWaited(value, v)
  if v and string.sub(v, -1) ~= '*' then redis.call('SET', value, v .. '*', 'KEEPTTL') end
end
