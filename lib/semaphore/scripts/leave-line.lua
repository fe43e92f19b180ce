-- A waiter gives up (its wait ran out or was aborted): leaves the line and, if it was handed
-- permits in the meantime, gives them back. Its leaving may let the waiters behind it in.
--
-- KEYS   holders, meta, line, entries, channel of one semaphore (see common.lua)
-- ARGV[1] token, ARGV[2] sharded ('1': SPUBLISH), ARGV[3] entryTtl ms (as in acquire.lua)
-- Returns 1 when the token had been handed permits (given back now), else 0.

local k = semKeys(0)
redis.call('ZREM', k.line, ARGV[1])
redis.call('HDEL', k.entries, ARGV[1])
local had = drop(k, ARGV[1]) and 1 or 0
prune(k)
serve(k, publisher(ARGV[2]))
tidy(k, tonumber(ARGV[3]))
return had
