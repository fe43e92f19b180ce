-- The keys of a lock that the acquire and release scripts name after its value key instead of
-- being given them (each key given costs the server ~1,400 instructions): the value key followed
-- by these suffixes, as lockRedisKeys (lib/lock/lock-keys.ts) names them; change both together.
-- They share the value key's hash tag, so its Cluster slot. Constants, not a helper function: a
-- function would be created on every call, and this comes first (lock-scripts.ts), before the
-- fast paths.
local LINE, ENTRIES, RELEASED = ':line', ':entries', ':released'
