-- Adds the tasks of a flow (or, on Cluster, the part of it that lives in one slot): leaves are
-- placed as plain ready tasks, parents wait in `wchildren` for their children (includes/flow.lua).
-- All or nothing: nothing is written when a task exists already or a queue would pass its bound.
--
-- KEYS: one group of 15 keys per queue of the call, in this order:
--   +0 due, +1 info, +2 payload, +3 opts, +4 events, +5 wake, +6 config ('maxSize'), +7 dead,
--   +8 done, +9 cancelled, +10 wchildren, +11 flow, +12 parents, +13 expired, +14 expiries
--   (a leaf with a deadline is indexed there; a parent's is checked when it would start)
-- ARGV[1] eventsMaxLen
-- ARGV[2] maxSize      the module's bound of tasks queued and running (0: none); a queue's own
--                      (config 'maxSize') wins
-- ARGV[3..] nodes, 6 values each, parents before their children:
--   group   1-based index of the node's queue group in KEYS
--   id
--   payload stored payload field ('' for none)
--   opts    JSON of the task's own options ('' for none)
--   parent  JSON {q, p, b, m, c, k} of the link to its parent ('' for a root)
--   flow    JSON {c = {{queue, id}, ...}} of its children ('' for a leaf; c empty for the root
--           of a one-task flow: a leaf whose record only carries k)
--   Every flow record and parent link carries k = the call id (fresh for every enqueueFlow,
--   the same in each of its calls): the first node's tells a call run twice (below), and a link
--   counts only for the parent whose record has its k (includes/flow.lua).
--
-- Returns {'ok', added}, {'exists', nodeIndex} (0-based: that task exists in its queue, in any
-- state still kept) or {'full', groupIndex (0-based), size, maxSize}. A call whose first node is
-- recorded with this call's id (a parent's flow record, a leaf's link to its parent) ran before
-- (ioredis sends a command again when its connection closed before the reply; after a failover
-- the promoted replica may have run it): {'ok', added} again, nothing written.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local G = 15
local maxLen = tonumber(ARGV[1])
local nodes = (#ARGV - 2) / 6

local function groupOf(i)
  return 1 + (tonumber(ARGV[3 + i * 6]) - 1) * G
end

-- Whether the first node (of group g) is stored with this call's id: this call ran before.
local function ranBefore(g)
  local mine, hash = ARGV[8], KEYS[g + 11]
  if mine == '' then mine, hash = ARGV[7], KEYS[g + 12] end
  if mine == '' then return false end
  local stored = redis.call('HGET', hash, ARGV[4])
  return stored and cjson.decode(stored).k == cjson.decode(mine).k
end

local adding = {}
for i = 0, nodes - 1 do
  local g = groupOf(i)
  if redis.call('HEXISTS', KEYS[g + 1], ARGV[4 + i * 6]) == 1 then
    if i == 0 and ranBefore(g) then return {'ok', nodes} end
    return {'exists', i}
  end
  adding[g] = (adding[g] or 0) + 1
end

-- The bound, as enqueue.lua counts it: every task with an info entry but the finished ones kept.
for g, n in pairs(adding) do
  local maxSize = tonumber(redis.call('HGET', KEYS[g + 6], 'maxSize') or ARGV[2])
  if maxSize > 0 then
    local size = redis.call('HLEN', KEYS[g + 1]) - redis.call('ZCARD', KEYS[g + 7])
      - redis.call('ZCARD', KEYS[g + 8]) - redis.call('ZCARD', KEYS[g + 9])
      - redis.call('ZCARD', KEYS[g + 13])
    if size + n > maxSize then return {'full', (g - 1) / G, size, maxSize} end
  end
end

local woken = {}
for i = 0, nodes - 1 do
  local g = groupOf(i)
  local a = 3 + i * 6
  local id = ARGV[a + 1]
  redis.call('HSET', KEYS[g + 1], id, now)
  if ARGV[a + 2] ~= '' then redis.call('HSET', KEYS[g + 2], id, ARGV[a + 2]) end
  if ARGV[a + 3] ~= '' then redis.call('HSET', KEYS[g + 3], id, ARGV[a + 3]) end
  if ARGV[a + 4] ~= '' then redis.call('HSET', KEYS[g + 12], id, ARGV[a + 4]) end
  local children = 0
  if ARGV[a + 5] ~= '' then
    redis.call('HSET', KEYS[g + 11], id, ARGV[a + 5])
    children = #cjson.decode(ARGV[a + 5]).c
  end
  if children > 0 then
    redis.call('ZADD', KEYS[g + 10], children, id)
    emit(KEYS[g + 4], maxLen, 'waiting-children', id)
  else
    redis.call('ZADD', KEYS[g], now, id)
    local x = expiryOf(ARGV[a + 3])
    if x then redis.call('ZADD', KEYS[g + 14], x, id) end
    emit(KEYS[g + 4], maxLen, 'enqueued', id)
    woken[g] = true
  end
end
for g in pairs(woken) do
  if redis.call('LLEN', KEYS[g + 5]) == 0 then redis.call('RPUSH', KEYS[g + 5], '1') end
end
return {'ok', nodes}
