-- Sets a new TTL on the permits of a token, only if it still holds them (not expired).
--
-- KEYS   holders, meta, line, entries, channel of one semaphore (see common.lua)
-- ARGV[1] token, ARGV[2] ttl ms, ARGV[3] entryTtl ms (as in acquire.lua)
-- Returns 1 when extended, 0 when the token holds no permits any more.

local k = semKeys(0)
local expiry = redis.call('ZSCORE', k.holders, ARGV[1])
if not expiry or tonumber(expiry) <= now then return 0 end
redis.call('ZADD', k.holders, 'XX', now + tonumber(ARGV[2]), ARGV[1])
tidy(k, tonumber(ARGV[3]))
return 1
