-- The fast path of release.lua (see there for KEYS, ARGV and replies): one lock that nobody
-- waits for. Put before every helper of release.lua (lock-scripts.ts), so that a call answered
-- here sets up nothing else. Defines `token` and `first` (the lock's value, when read here: it is
-- not read again) for release.lua.

local token = ARGV[1]

local first = nil
if #KEYS == 2 and (ARGV[4] or '') == '' then
  first = redis.call('GET', KEYS[1])
  if first == token then
    redis.call('DEL', KEYS[1])
    return 1
  end
  if first ~= token .. '*' then return 0 end
end
