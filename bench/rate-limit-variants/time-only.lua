-- Variant: TIME and nothing else.
local t = redis.call('TIME')
return { 1, 0, 0, 0 }
