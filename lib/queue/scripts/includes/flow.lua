-- Flows (docs/queue.md, "Flows"): a parent waits in `wchildren` until each of its children
-- finished, then is placed like a plain task. Shared by the scripts that end a child (claim.lua,
-- cancel.lua, remove.lua, drain.lua, pop.lua, dequeue.lua), apply an outcome recorded for later
-- (flow-apply.lua) or end a waiting parent; put after events.lua (queue-scripts.ts).
--
-- Keys of a queue used by flows (queue-keys.ts):
--   wchildren zset: parent id -> children still to finish
--   cdone     hash: 'parentId \0 childQueue:childId' -> the child's outcome while its parent
--             waits: 'c' .. result JSON (completed) or 'f' .. error JSON (failed); one field per
--             child, so an outcome applied twice counts once
--   flow      hash: parent id -> JSON {c = {{queue, id}, ...}, k, r = {['queue:id'] = outcome}}
--             (k: the id of the enqueueFlow call that wrote it; r: the outcomes, set when the
--             parent stops waiting; childResults reads it)
--   parents   hash: child id -> JSON {q, p, b, m, c, k}: its parent's queue, id and key base, the
--             child's onChildFailure, the child's own 'queue:id' and the id of the enqueueFlow
--             call that wrote it (k, also in the parent's flow record: a link counts only for the
--             parent written by the same call). Under 'wait' a failed child keeps its link (a
--             requeued dead letter still counts) until the child is deleted (remove, drain, clean,
--             the keepDead / keepCompleted trims), which deletes the link with its other data
--   outbox    list of JSON {q, p, b, m, c, k, o, d}: outcomes (o 'c' or 'f', d the data) a script
--             could not apply to the parent because it was not given the parent's keys (another
--             Cluster slot, or a child that ended without a caller that knew its parent);
--             QueueStore applies them with flow-apply.lua, idempotently.
--
-- A parent queue's keys are passed to a script as a group of FLOW_GROUP keys, in this order
-- (`flowGroupKeys` in flows/flow-keys.ts): due, wake, events, dead, errors, wchildren, cdone,
-- flow, parents, outbox, opts, expiries (the last two: a parent made ready indexes its deadline).

local FLOW_GROUP = 12

-- The keys of the parent group starting at KEYS[g].
local function flowKeys(g)
  return {due = KEYS[g], wake = KEYS[g + 1], events = KEYS[g + 2], dead = KEYS[g + 3],
    errors = KEYS[g + 4], wchildren = KEYS[g + 5], cdone = KEYS[g + 6], flow = KEYS[g + 7],
    parents = KEYS[g + 8], outbox = KEYS[g + 9], opts = KEYS[g + 10], expiries = KEYS[g + 11]}
end

-- The parent groups among KEYS[first..]: key base -> index of the group's first key ('<base>:due').
local function flowGroups(first)
  local groups = {}
  for i = first, #KEYS, FLOW_GROUP do groups[string.sub(KEYS[i], 1, -5)] = i end
  return groups
end

-- Parent `pid` stops waiting (ready, dead or cancelled): its children's outcomes move from
-- cdone into its flow record.
local function closeParent(P, pid)
  redis.call('ZREM', P.wchildren, pid)
  local v = redis.call('HGET', P.flow, pid)
  if not v then return end
  local f = cjson.decode(v)
  local names, fields = {}, {}
  for i, c in ipairs(f.c) do
    names[i] = c[1] .. ':' .. c[2]
    fields[i] = pid .. '\0' .. names[i]
  end
  local r = {}
  for i = 1, #fields, 1000 do
    local part = {unpack(fields, i, math.min(i + 999, #fields))}
    for j, o in ipairs(redis.call('HMGET', P.cdone, unpack(part))) do
      if o then r[names[i + j - 1]] = o end
    end
    redis.call('HDEL', P.cdone, unpack(part))
  end
  -- An empty table encodes as {} (an object), which is what readers expect.
  f.r = r
  redis.call('HSET', P.flow, pid, cjson.encode(f))
end

-- Longest failure message stored with a task, in characters: as MAX_MESSAGE_CHARS of
-- task-errors.ts, which cuts a message to its first 1,000 UTF-16 code units (`slice(0, 1000)`).
local MAX_MESSAGE_CHARS = 1000

-- The first MAX_MESSAGE_CHARS characters of UTF-8 text s, counted as JavaScript counts them (a
-- character outside the BMP, 4 bytes, is 2); cut between characters, never inside one.
local function cutMessage(s)
  -- A character has at least one byte: text of at most that many bytes is short enough.
  if #s <= MAX_MESSAGE_CHARS then return s end
  local units, i, n = 0, 1, #s
  while i <= n do
    local b = string.byte(s, i)
    local len, u = 1, 1
    if b >= 0xF0 then
      len, u = 4, 2
    elseif b >= 0xE0 then
      len = 3
    elseif b >= 0xC0 then
      len = 2
    end
    if units + u > MAX_MESSAGE_CHARS then break end
    units = units + u
    i = i + len
  end
  return string.sub(s, 1, i - 1)
end

-- The error a parent dies with when child e failed under 'fail-parent'. Its message embeds the
-- child's, itself such a message when the child was a parent: cut as encodeTaskError cuts
-- messages, it stays bounded however deep the flow. Error JSON cjson cannot decode (a lone
-- surrogate escape written before encodeTaskError made messages well-formed, or a cancel reason)
-- gives a fixed text, not the raw JSON: that would carry the child's stack into the message.
local function childFailedError(e)
  local ok, err = pcall(cjson.decode, e.d)
  local why = e.d
  if ok and type(err) == 'table' and type(err.message) == 'string' then
    why = err.message
  elseif string.sub(e.d, 1, 1) == '{' then
    why = '(its error could not be decoded)'
  end
  return cjson.encode({name = 'FlowChildFailedError',
    message = cutMessage("child '" .. e.c .. "' of '" .. e.q .. ':' .. e.p .. "' failed: " .. why)})
end

local applyChild

-- Task `id` ended with outcome o ('c' completed, 'f' dead or cancelled) and data d (result or
-- error JSON). `parents` and `outbox` are the keys of its own queue. When it has a parent, the
-- outcome is applied to it at once if the parent's queue is among `groups` (flowGroups), else
-- pushed to `outbox`. Returns true when something was pushed to an outbox (here or up the tree).
local function childEnded(parents, outbox, groups, id, o, d, now, maxLen)
  local v = redis.call('HGET', parents, id)
  if not v then return false end
  local e = cjson.decode(v)
  -- Under 'wait' a failed child keeps its link: requeued from the dead letters, it still counts.
  if o == 'c' or e.m ~= 'wait' then redis.call('HDEL', parents, id) end
  e.o = o
  e.d = d
  local g = groups and groups[e.b]
  if g then return applyChild(flowKeys(g), e, now, maxLen) end
  redis.call('RPUSH', outbox, cjson.encode(e))
  return true
end

-- Applies child outcome e ({q, p, b, m, c, k, o, d}) to its parent, whose queue's keys are P. Does
-- nothing when the parent no longer waits (it finished, was cancelled or removed), when the
-- waiting task with the parent's id belongs to another flow than the link (a later enqueueFlow
-- that reused the id: its flow record has another call id k), or when this outcome was applied
-- already. Returns true when a parent that died pushed to an outbox.
applyChild = function(P, e, now, maxLen)
  local left = redis.call('ZSCORE', P.wchildren, e.p)
  if not left then return false end
  -- A link and a record written before every one carried k (an earlier version put it only in
  -- the first node's record of each call) are applied as then: only a link whose k differs from
  -- the k of the parent's record is another flow's. Found as text, not decoded (a parent's record
  -- lists all its children): '"k":"' is the record's own key, as a string value cannot hold an
  -- unescaped '"', and k is a UUID.
  if e.k then
    local f = redis.call('HGET', P.flow, e.p)
    if f and string.find(f, '"k":"', 1, true)
        and not string.find(f, '"k":"' .. tostring(e.k) .. '"', 1, true) then
      return false
    end
  end
  local field = e.p .. '\0' .. e.c
  local prev = redis.call('HGET', P.cdone, field)
  if e.o == 'c' then
    -- A failure counts once; only under 'wait' does a later completion replace it.
    if prev and (string.sub(prev, 1, 1) == 'c' or e.m ~= 'wait') then return false end
    redis.call('HSET', P.cdone, field, 'c' .. e.d)
  else
    if prev then return false end
    redis.call('HSET', P.cdone, field, 'f' .. e.d)
    if e.m == 'wait' then return false end
    if e.m ~= 'ignore' then
      closeParent(P, e.p)
      local err = childFailedError(e)
      redis.call('HSET', P.errors, e.p, err)
      redis.call('ZADD', P.dead, now, e.p)
      emit(P.events, maxLen, 'dead', e.p, 'e', err)
      return childEnded(P.parents, P.outbox, nil, e.p, 'f', err, now, maxLen)
    end
  end
  if tonumber(redis.call('ZINCRBY', P.wchildren, -1, e.p)) > 0 then return false end
  closeParent(P, e.p)
  redis.call('ZADD', P.due, now, e.p)
  -- Its deadline is indexed now that it waits like any task (includes/expiry.lua), so that it
  -- expires on time on a paused queue too. Not at add-flow: the sweep drops the entry of a task
  -- that is not waiting, and a parent's deadline counts only once its children finished. The
  -- deadline is read as expiryOf reads it (expiry.lua is not among every flow script's includes).
  local x = string.match(redis.call('HGET', P.opts, e.p) or '', '"x":(%d+)')
  if x then redis.call('ZADD', P.expiries, x, e.p) end
  emit(P.events, maxLen, 'enqueued', e.p)
  if redis.call('LLEN', P.wake) == 0 then redis.call('RPUSH', P.wake, '1') end
  return false
end
