-- Releases the locks a token holds, handing each one straight to the first live waiter in its
-- line: the waiter owns it as soon as this script ends and learns so from the message, which
-- saves it a round trip and leaves no gap in which a newcomer could barge in.
--
-- KEYS, 5 per lock: value, fence, line, entries (as in acquire.lua), channel (pub/sub channel)
-- ARGV[1] token
-- ARGV[2] sharded  '1': publish with SPUBLISH (Cluster), else PUBLISH
--
-- Publishes on each released lock's channel either
--   'h <token> <fence> <nowMs> <ttlMs>'  handed to the waiter <token>, or
--   'f'                                  free, nobody was waiting in line.
-- Returns the number of locks that were held by ARGV[1] (and are released now).

local token = ARGV[1]
local publish = ARGV[2] == '1' and 'SPUBLISH' or 'PUBLISH'
local released = 0
local now = nil

for i = 0, #KEYS / 5 - 1 do
  local value, fence, line, entries, channel =
    KEYS[i * 5 + 1], KEYS[i * 5 + 2], KEYS[i * 5 + 3], KEYS[i * 5 + 4], KEYS[i * 5 + 5]
  if redis.call('GET', value) == token then
    released = released + 1
    local handed = false
    while not handed do
      local next = redis.call('ZRANGE', line, 0, 0)[1]
      if not next then break end
      local entry = redis.call('HGET', entries, next)
      redis.call('ZREM', line, next)
      redis.call('HDEL', entries, next)
      if entry then
        if not now then
          local t = redis.call('TIME')
          now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        end
        local deadline, ttl, fencing = string.match(entry, '^(%d+):(%d+):(%d)$')
        -- A waiter that stopped renewing its entry is skipped, not waited for.
        if tonumber(deadline) >= now then
          redis.call('SET', value, next, 'PX', ttl)
          local f = fencing == '1' and redis.call('INCR', fence) or 0
          redis.call(publish, channel, 'h ' .. next .. ' ' .. f .. ' ' .. now .. ' ' .. ttl)
          handed = true
        end
      end
    end
    if not handed then
      redis.call('DEL', value)
      redis.call(publish, channel, 'f')
    end
  end
end
return released
