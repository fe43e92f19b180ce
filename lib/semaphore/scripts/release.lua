-- Releases the permits a token holds and hands free permits to the waiters in arrival order
-- (as many as fit), announcing each grant on the channel.
--
-- KEYS   holders, meta, line, entries, channel of one semaphore (see common.lua)
-- ARGV[1] token, ARGV[2] sharded ('1': SPUBLISH), ARGV[3] entryTtl ms (as in acquire.lua)
-- Returns 1 when the token held permits (released now), 0 when not (expired, or never granted).

local k = semKeys(0)
local released = drop(k, ARGV[1]) and 1 or 0
prune(k)
serve(k, publisher(ARGV[2]))
tidy(k, tonumber(ARGV[3]))
return released
