-- take-units.lua: takes units from a sale's stock for the orders of one batch of buyers, once.
-- The batch was read and numbered under the sale's stock lock from the sale's `seq`; the units are
-- taken only if `seq` is still that number, so a batch runs at most once however often the call
-- reaches Redis. It can reach it twice: ioredis sends a command again when the connection closed
-- before its reply, and a master SIGKILLed just after it ran the call (its replica had it) leaves
-- the promoted replica to run it a second time. A MULTI of HINCRBYs would take the units twice and
-- hold them once: units neither sold nor on sale for good (issue 34, item 7).
--
-- KEYS[1] sale      HASH  stock, sold, price, seq
-- KEYS[2] buyers    HASH  userId -> order JSON
-- KEYS[3] orders    HASH  orderId -> order JSON (units taken and not returned)
-- KEYS[4] holds     ZSET  orderId -> when its unit was taken (units not settled yet)
-- KEYS[5] released  HASH  orderId -> order JSON (units that went back on sale)
-- ARGV[1]           the sale's `seq` the batch's order numbers follow
-- ARGV[2..]         for each unit: orderId, userId, when it was taken (epoch ms), order JSON
--
-- Returns 1 when the units were taken now, 0 when this same call took them already (its first
-- order is recorded with the same JSON, taken or released since). Any other `seq` (the sale
-- changed since it was read: the stock lock was lost) is the error SALE_CHANGED, nothing taken.
local seq = tonumber(redis.call('HGET', KEYS[1], 'seq'))
if seq ~= tonumber(ARGV[1]) then
  local first, json = ARGV[2], ARGV[5]
  if redis.call('HGET', KEYS[3], first) == json or redis.call('HGET', KEYS[5], first) == json then
    return 0
  end
  return redis.error_reply('SALE_CHANGED the sale\'s seq is ' .. tostring(seq) .. ', not ' .. ARGV[1])
end
local n = (#ARGV - 1) / 4
redis.call('HINCRBY', KEYS[1], 'stock', -n)
redis.call('HINCRBY', KEYS[1], 'sold', n)
redis.call('HSET', KEYS[1], 'seq', seq + n)
for i = 2, #ARGV, 4 do
  redis.call('HSET', KEYS[2], ARGV[i + 1], ARGV[i + 3])
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 3])
  -- Every unit taken is held until it is settled: its row written, or back on sale.
  redis.call('ZADD', KEYS[4], ARGV[i + 2], ARGV[i])
end
return 1
