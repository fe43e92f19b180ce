-- The fast path of acquire.lua (see there for KEYS, ARGV and replies): one lock, nobody in its
-- line, and the caller would not wait. Put after lock-keys.lua and fence-counter.lua and before
-- every other helper of acquire.lua (lock-scripts.ts), so that a call answered here sets up
-- nothing else. Defines `token` and `flags` for acquire.lua.

local token = ARGV[1]
local flags = ARGV[3]
if #KEYS == 2 and string.sub(flags, 3, 3) == '0'
  and redis.call('EXISTS', KEYS[1] .. LINE) == 0 then
  if not redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2]) then
    -- Held by this token: the same call run twice (resent, see acquire.lua). Granted.
    local v = redis.call('GET', KEYS[1])
    if v == token or v == token .. '*' then
      return {1, v == token and 0 or 1, string.sub(flags, 1, 1) == '1' and lastFence(KEYS[2]) or 0}
    end
    return {0, 0, redis.call('PTTL', KEYS[1]), 0}
  end
  if string.sub(flags, 1, 1) ~= '1' then return {1, 0, 0} end
  return {1, 0, nextFence(KEYS[2], ARGV[4])}
end
