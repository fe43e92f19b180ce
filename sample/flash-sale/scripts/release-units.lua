-- release-units.lua: puts units taken from a sale's stock back on sale, atomically and at most
-- once per order (running it again for an order released already changes nothing but the hold).
-- Called when the `orders` queue refused the order (full), or when `order_outcomes` in
-- PostgreSQL says 'released' (SaleSettler).
--
-- KEYS[1] sale      HASH  stock, sold, price, seq
-- KEYS[2] buyers    HASH  userId -> order JSON
-- KEYS[3] orders    HASH  orderId -> order JSON (units taken and not returned)
-- KEYS[4] holds     ZSET  orderId -> when its unit was taken (units not settled yet)
-- KEYS[5] released  HASH  orderId -> order JSON (units that went back on sale)
-- ARGV              the order ids to release
--
-- Returns the number of units that went back to the stock now.
local returned = 0
for _, orderId in ipairs(ARGV) do
  redis.call('ZREM', KEYS[4], orderId)
  local json = redis.call('HGET', KEYS[3], orderId)
  if json then
    redis.call('HDEL', KEYS[3], orderId)
    local userId = cjson.decode(json).userId
    -- The buyer's record goes only if it still names this order: the buyer may be free to buy
    -- again already (a record for a newer order stays).
    if redis.call('HGET', KEYS[2], userId) == json then
      redis.call('HDEL', KEYS[2], userId)
    end
    redis.call('HSET', KEYS[5], orderId, json)
    returned = returned + 1
  end
end
if returned > 0 then
  redis.call('HINCRBY', KEYS[1], 'stock', returned)
  redis.call('HINCRBY', KEYS[1], 'sold', -returned)
end
return returned
