-- Sets a new TTL on a shared hold, only if the token still holds it; with ttl 0 only checks.
--
-- KEYS[1] value, KEYS[2] shared (as in acquire-shared.lua)
-- ARGV[1] token, ARGV[2] ttl ms ('0': check only)
-- Returns 1 when held (and extended), 0 when not.

local SHARED = '!shared'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not expiry or tonumber(expiry) <= now then return 0 end
local ttl = tonumber(ARGV[2])
if ttl == 0 then return 1 end
redis.call('ZADD', KEYS[2], 'XX', now + ttl, ARGV[1])
local keep = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]) - now
redis.call('PEXPIRE', KEYS[2], keep)
local v = redis.call('GET', KEYS[1])
if v == SHARED or v == SHARED .. '*' then redis.call('PEXPIRE', KEYS[1], keep) end
return 1
