-- Changes a queue-wide setting shared by every instance, and wakes an idle worker so that it
-- sees the change at once.
--
-- KEYS[1] config  hash: 'paused' -> '1', 'concurrency' -> global limit of leased tasks
-- KEYS[2] wake    list: wake-up marker for idle workers (at most one element)
-- ARGV[1] field   'paused' or 'concurrency'
-- ARGV[2] value   the new value; '' deletes the field (resume, no global limit)
--
-- Returns 1.

if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
redis.call('LPUSH', KEYS[2], '1')
redis.call('LTRIM', KEYS[2], 0, 0)
return 1
