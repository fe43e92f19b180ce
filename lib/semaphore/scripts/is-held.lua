-- Whether a token still holds permits (its grant has not expired).
--
-- KEYS   holders, meta, line, entries, channel of one semaphore (see common.lua)
-- ARGV[1] token
-- Returns 1 when held, else 0.

local expiry = redis.call('ZSCORE', semKeys(0).holders, ARGV[1])
return (expiry and tonumber(expiry) > now) and 1 or 0
