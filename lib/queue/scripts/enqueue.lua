-- Adds tasks to a queue, each id at most once.
--
-- KEYS[1]  due       zset: id -> due time (ms) of tasks without priority or group
-- KEYS[2]  leased    zset: id -> lease expiry (ms)
-- KEYS[3]  payload   hash: id -> JSON payload
-- KEYS[4]  attempts  hash: id -> claims so far
-- KEYS[5]  dead      zset: id -> time of death (ms)
-- KEYS[6]  wake      list: wake-up marker for idle workers (at most one element)
-- KEYS[7]  info      hash: id -> 'enqueuedAt' or 'enqueuedAt|dueAt|priority|seq|group'
-- KEYS[8]  errors    hash: id -> last error message
-- KEYS[9]  done      zset: id -> end of its keepCompleted window (ms)
-- KEYS[10] events    stream: the queue's events (includes/events.lua)
-- KEYS[11] progress  hash: id -> JSON of the last progress value
-- KEYS[12] opts      hash: id -> JSON of the task's own options
-- KEYS[13] results   hash: id -> 'finishedAt|result JSON' of kept completed tasks
-- KEYS[14] cancelled zset: id -> time it was cancelled
-- KEYS[15] ties      string: 'ms n': the last enqueue's Redis time and how many tasks it placed
--                    in that ms (orders tasks enqueued in the same ms; see dueScore)
-- KEYS[16] config    hash: 'maxSize' -> the queue's own bound (setMaxSize)
-- KEYS[17] logs      hash: id -> the task's log lines (task.log)
-- KEYS[18] expired   zset: id -> time it expired (an expired id is added again as a new task)
-- KEYS[19] expiries  zset: id -> deadline of tasks with one (includes/expiry.lua)
-- KEYS[20..25] are read only with replace, a priority or a group (the caller may leave them out
-- otherwise: a plain enqueue sends 19 keys):
-- KEYS[20] pending   zset: id -> due time of delayed tasks with a priority or a group
-- KEYS[21] prio      zset: id -> (priority + 1000) * 2^41 + seq, ready tasks with a priority
-- KEYS[22] gtasks    zset (all scores 0): group \0 seq(15 digits) \0 id, ready grouped tasks
-- KEYS[23] ring      zset: group -> turn (groups with ready tasks)
-- KEYS[24] gpark     zset: group -> time its next task may start
-- KEYS[25] seq       string: the queue's enqueue sequence (orders tasks with priority or group)
-- KEYS[26] dedup     hash: deduplication id -> 'taskId|expiresAt' (0: until that task finishes)
-- KEYS[27] dnext     hash: running task id -> JSON {dd, i, d, p?, o?} of the last call it
--                    deduplicated with keepLastIfActive (claim.lua adds it when the task ends)
-- KEYS[28] wchildren zset: flow parent id -> children still unfinished (read only with replace)
-- ARGV[1] delayMs     due time = Redis TIME + delayMs
-- ARGV[2] replace     '1': an id already queued (not leased, not a flow parent waiting for its
--                     children) is placed again with the new due
--                     time (and payload when given); with the call's priority and group when it
--                     names one, else with its own; its own options merged with the call's
--                     (mergedOpts)
-- ARGV[3] hasPayload  '1': ARGV[4] is the payload of every id; '2': the plain calls of one tick,
--                     one or more (segments, below)
-- ARGV[4] payload     JSON text ('' when hasPayload is '0'), stored as given: a traced enqueue
--                     puts its trace context first ('\1<traceparent>\n<JSON text or nothing>')
-- ARGV[5] priority    integer from -1000 to 1000; 0: none
-- ARGV[6] group       '' for none
-- ARGV[7] eventsMaxLen  length of the event stream (0: no events)
-- ARGV[8] opts        JSON of the tasks' own options (maxAttempts, backoff, timeoutMs, x: the
--                     deadline of expiresAt, indexed in expiries) and name ('n', also written
--                     into their 'enqueued' events), '' none
-- ARGV[9] maxSize     the module's bound of tasks queued and running (0: none); the queue's own
--                     (config 'maxSize') wins
-- ARGV[10] lifo        '1': each new plain id goes before every ready task (claimed next); only
--                     with delayMs 0, no replace, priority or group (QueueService checks)
-- ARGV[11] dedupId     '' for none; else the call has one id (QueueService checks), which is not
--                     added while the task that holds this deduplication id is unfinished
--                     (ttlMs 0) or its ttl runs: then a 'deduplicated' event (k: the kept task)
-- ARGV[12] dedupTtlMs  0: until the holding task finishes; -1: the same, and keepLastIfActive: a
--                     call deduplicated while the holder is leased is kept (the last one wins)
-- ARGV[13..] ids; with ARGV[3] '2', segments instead: concurrent plain calls of one process
--                     (the same options but their ids and payloads; QueueStore merges them), each
--                     as n, hasPayload, payload, then its n ids
--
-- Under maxmemory, Redis refuses a script's writes for OOM only at its first deny-oom command
-- (HSET, ZADD, …) and only while it has written nothing: on every path, what adds data writes first
-- with such a command, and the removals it needs (HDEL, ZREM) come after it.
--
-- Returns the number of ids newly added, or {size, maxSize} when the call would take the queue
-- past its bound: then nothing is added (all or nothing). With segments, two values per segment,
-- each segment all or nothing in its turn: {added, -1} or {size, maxSize}. A leased id is never
-- touched; an id completed within its keepCompleted window is refused (once the window ended it
-- is added as a new task). A dead, cancelled or expired id is added again as a new task (attempts, last
-- error and progress reset).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- `now` as a string, made once (Redis's Lua converts a number on every call that passes one).
local nowText = string.format('%d', now)
local due = now + tonumber(ARGV[1])
local replace = ARGV[2] == '1'
local hasPayload = ARGV[3] == '1'
-- The payload of the ids being added (ARGV[4], or a segment's).
local payloadText = ARGV[4]
local priority = tonumber(ARGV[5])
local group = ARGV[6]
local eventsMaxLen = tonumber(ARGV[7])
local opts = ARGV[8]
local changed = false
local keepsDone = redis.call('EXISTS', KEYS[9]) == 1
local lifo = ARGV[10] == '1'
-- The deadline of the tasks being added (expiresAt), or nil.
local expiresAt = expiryOf(opts)

-- The due score of the next plain task: tasks enqueued in the same ms (Redis time) would tie on
-- `due` and come out in id order, so the n-th of that ms is placed at due - 1 + (n + 1) / 2048
-- (2048 steps: the precision of a double at epoch-ms magnitudes): in enqueue order, never after
-- `due` (a task is ready at most 1 ms early, never late). Past 2,047 tasks in one ms they tie.
local tieN = nil
local function dueScore()
  if not tieN then
    local ms, n = string.match(redis.call('GET', KEYS[15]) or '', '^(%d+) (%d+)$')
    tieN = (ms and tonumber(ms) == now) and tonumber(n) or 0
  end
  local n = math.min(tieN, 2047)
  tieN = tieN + 1
  return due - 1 + (n + 1) / 2048
end

-- The score of a LIFO task: 1/2048 ms before the first ready task (a due time at most a few ms
-- in the past per thousand LIFO tasks), or now - 1 when none is ready: claimed before them all.
local function lifoScore()
  local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
  local s = now - 1
  if head and tonumber(head) - 1 / 2048 < s then s = tonumber(head) - 1 / 2048 end
  return s
end

-- Puts a task where it waits: due (plain), pending (delayed with a priority or a group), gtasks
-- or prio; `prio` and `grp` are the task's priority and group.
local function place(id, prio, grp)
  if grp == '' and prio == 0 then
    redis.call('HSET', KEYS[7], id, nowText)
    redis.call('ZADD', KEYS[1], lifo and lifoScore() or dueScore(), id)
    return
  end
  local seq = redis.call('INCR', KEYS[25])
  redis.call('HSET', KEYS[7], id, now .. '|' .. due .. '|' .. prio .. '|' .. seq .. '|' .. grp)
  if due > now then
    redis.call('ZADD', KEYS[20], due, id)
  elseif grp ~= '' then
    redis.call('ZADD', KEYS[22], 0, groupMember(grp, seq, id))
    if not redis.call('ZSCORE', KEYS[24], grp) then joinRing(KEYS[23], grp) end
  else
    redis.call('ZADD', KEYS[21], prioScore(prio, seq), id)
  end
end

-- Takes a queued task out of wherever it waits (before it is placed again); returns its parsed
-- info (nil for a plain task).
local function unplace(id, info)
  local m = parseInfo(info)
  if not m then
    redis.call('ZREM', KEYS[1], id)
    return nil
  end
  redis.call('ZREM', KEYS[20], id)
  redis.call('ZREM', KEYS[21], id)
  if m.group ~= '' then redis.call('ZREM', KEYS[22], groupMember(m.group, m.seq, id)) end
  return m
end

local function setPayload(id)
  if hasPayload then
    redis.call('HSET', KEYS[3], id, payloadText)
  else
    redis.call('HDEL', KEYS[3], id)
  end
  if opts ~= '' then redis.call('HSET', KEYS[12], id, opts) end
  if expiresAt then redis.call('ZADD', KEYS[19], expiresAt, id) end
end

-- What a task that ended left behind, before its id is added again as a new task.
local function forgetRun(id)
  for _, k in ipairs({KEYS[4], KEYS[8], KEYS[11], KEYS[12], KEYS[13], KEYS[17]}) do
    redis.call('HDEL', k, id)
  end
end

-- The name ('n') in a task's own options JSON, or a false value when it has none.
local function nameOf(o)
  return o and string.find(o, '"n":', 1, true) and cjson.decode(o).n
end

-- The tasks' name, for their 'enqueued' events; false when they have none.
local name = nameOf(opts)

-- A replaced task's own options: the stored ones (JSON text, or false for none), each that the
-- call gives (opts) overriding its own, so that a replace keeps the task's name, deadline and
-- failure policy unless given (written over, a replace with one option dropped the others: a
-- named task lost its name and died unhandled). Written as storedOwnOptions (queue-replies.ts)
-- writes them, in its key order; integers with %d, as cjson.encode keeps only 14 digits and a
-- deadline may have 16.
local OWN_KEYS = {'m', 'b', 't', 'x', 'n'}
local function mergedOpts(stored)
  if not stored then return opts end
  local given, own, parts = cjson.decode(opts), cjson.decode(stored), {}
  for _, k in ipairs(OWN_KEYS) do
    local v = given[k]
    if v == nil then v = own[k] end
    if type(v) == 'number' then
      parts[#parts + 1] = '"' .. k .. '":' .. string.format('%d', v)
    elseif v ~= nil then
      parts[#parts + 1] = '"' .. k .. '":' .. cjson.encode(v)
    end
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- An 'enqueued' event of task `id`, named `n` (false: none).
local function enqueued(id, n)
  if n then
    if ARGV[1] ~= '0' then
      emit(KEYS[10], eventsMaxLen, 'enqueued', id, 'd', ARGV[1], 'n', n)
    else
      emit(KEYS[10], eventsMaxLen, 'enqueued', id, 'n', n)
    end
  elseif ARGV[1] ~= '0' then
    emit(KEYS[10], eventsMaxLen, 'enqueued', id, 'd', ARGV[1])
  else
    emit(KEYS[10], eventsMaxLen, 'enqueued', id)
  end
end

-- Every task that exists (queued, delayed, leased or dead) has an info entry, so for a plain
-- enqueue HSETNX both tells a new id apart and records its enqueue time: one command instead of
-- looking in the leased, due and info keys first.
local plain = not replace and group == '' and priority == 0
-- The payloads and due scores of the plain ids added (not LIFO: its score reads the head of due),
-- written by finishCall with one HSET and one ZADD for the whole call instead of one each.
local newPayloads, newDue = {}, {}

-- Deduplication: the task holding the id is unfinished when it has an info entry and is not in
-- done, dead or cancelled. Each call also looks at 4 random entries and drops the stale ones, so
-- the hash stays about as large as the ids that hold (no janitor).
local dedupId = ARGV[11]
local function dedupHolds(v)
  local owner, exp = string.match(v or '', '^(.*)|(%d+)$')
  if not owner then return nil end
  if tonumber(exp) > 0 then return tonumber(exp) > now and owner or nil end
  if redis.call('HEXISTS', KEYS[7], owner) == 0 or redis.call('ZSCORE', KEYS[9], owner)
      or redis.call('ZSCORE', KEYS[5], owner) or redis.call('ZSCORE', KEYS[14], owner)
      or redis.call('ZSCORE', KEYS[18], owner) then
    return nil
  end
  return owner
end
-- The stale entries seen, dropped once the call wrote (after its first deny-oom write).
local staleDedup = {}
if dedupId ~= '' then
  local seen = redis.call('HRANDFIELD', KEYS[26], 4, 'WITHVALUES')
  for i = 1, #seen, 2 do
    if seen[i] ~= dedupId and not dedupHolds(seen[i + 1]) then staleDedup[#staleDedup + 1] = seen[i] end
  end
  local holder = dedupHolds(redis.call('HGET', KEYS[26], dedupId))
  if holder then
    if ARGV[12] == '-1' and redis.call('ZSCORE', KEYS[2], holder) then
      local kept = {dd = dedupId, i = ARGV[13], d = tonumber(ARGV[1])}
      if hasPayload then kept.p = payloadText end
      if opts ~= '' then kept.o = opts end
      redis.call('HSET', KEYS[27], holder, cjson.encode(kept))
    end
    emit(KEYS[10], eventsMaxLen, 'deduplicated', ARGV[13], 'k', holder)
    variadic('HDEL', KEYS[26], staleDedup)
    return 0
  end
end

-- The bound: tasks queued or running are every task with an info entry but the finished ones
-- kept (completed, dead, cancelled, expired). The entries alone (one O(1) read) are an upper bound of the
-- size: while they leave room for every id of ARGV[first..last], nothing else is read. Otherwise
-- the size takes three more O(1) reads, and when the call could still pass the bound, an id
-- counts as new unless it exists and is not finished. Returns size, maxSize when those ids would
-- pass the bound, else nothing.
local maxSize = tonumber(redis.call('HGET', KEYS[16], 'maxSize') or ARGV[9])
-- The info entries, read once per script call; each id a segment adds counts one more (an upper
-- bound: an id whose keep window ended is deleted and added again).
local entries = nil
local function overBound(first, last)
  if maxSize <= 0 then return end
  entries = entries or redis.call('HLEN', KEYS[7])
  local n = last - first + 1
  if entries + n <= maxSize then return end
  -- Near the bound: the exact count (entries read again: the running one is an upper bound).
  entries = redis.call('HLEN', KEYS[7])
  local size = entries - redis.call('ZCARD', KEYS[5])
    - redis.call('ZCARD', KEYS[9]) - redis.call('ZCARD', KEYS[14]) - redis.call('ZCARD', KEYS[18])
  if size + n <= maxSize then return end
  -- An id given twice (in one call, or in two calls of one merged batch) adds one task.
  local adding, seen = 0, {}
  for i = first, last do
    local id = ARGV[i]
    if not seen[id] then
      seen[id] = true
      local finished = redis.call('ZSCORE', KEYS[5], id) or redis.call('ZSCORE', KEYS[14], id)
        or redis.call('ZSCORE', KEYS[18], id)
      local kept = redis.call('ZSCORE', KEYS[9], id)
      if redis.call('HEXISTS', KEYS[7], id) == 0 or finished or (kept and tonumber(kept) <= now) then
        adding = adding + 1
      end
    end
  end
  if size + adding > maxSize then return size, maxSize end
end

-- Adds the ids ARGV[first..last] (with the current payload); returns how many were new.
local function addIds(first, last)
  local added = 0
  for i = first, last do
    local id = ARGV[i]
    local doneUntil = keepsDone and redis.call('ZSCORE', KEYS[9], id)
    if doneUntil and tonumber(doneUntil) > now then
      -- completed within its keepCompleted window: refused
    else
      -- Its window ended (no ack trimmed it yet): forgotten, then added as a new task. Its info
      -- entry is written first (HSET, deny-oom), the run's leftovers removed after it.
      local fresh = doneUntil and redis.call('HSET', KEYS[7], id, nowText) >= 0
      if fresh then
        redis.call('ZREM', KEYS[9], id)
        redis.call('HDEL', KEYS[3], id)
        forgetRun(id)
      end
      if plain and (fresh or redis.call('HSETNX', KEYS[7], id, nowText) == 1) then
        if lifo then
          setPayload(id)
          redis.call('ZADD', KEYS[1], lifoScore(), id)
        else
          if hasPayload then
            newPayloads[#newPayloads + 1] = id
            newPayloads[#newPayloads + 1] = payloadText
          else
            redis.call('HDEL', KEYS[3], id)
          end
          if opts ~= '' then redis.call('HSET', KEYS[12], id, opts) end
          if expiresAt then redis.call('ZADD', KEYS[19], expiresAt, id) end
          newDue[#newDue + 1] = dueScore()
          newDue[#newDue + 1] = id
        end
        added = added + 1
        changed = true
        enqueued(id, name)
      elseif fresh or not redis.call('ZSCORE', KEYS[2], id) then
        local queued = not fresh and redis.call('ZSCORE', KEYS[1], id) ~= false
        local info = not fresh and (replace or not queued) and redis.call('HGET', KEYS[7], id)
        -- A dead, cancelled or expired id: added again as a new task, its run forgotten below.
        local ended = false
        if not queued and info then
          ended = redis.call('ZSCORE', KEYS[5], id) or redis.call('ZSCORE', KEYS[14], id)
            or redis.call('ZSCORE', KEYS[18], id)
          queued = not ended
        end
        if not queued then
          -- New, or added again: the HSET of its info entry (place) is the first write, and what
          -- an ended run left is removed after it.
          place(id, priority, group)
          if ended then
            redis.call('ZREM', KEYS[5], id)
            redis.call('ZREM', KEYS[14], id)
            redis.call('ZREM', KEYS[18], id)
            forgetRun(id)
          end
          setPayload(id)
          added = added + 1
          changed = true
          enqueued(id, name)
        elseif replace and not redis.call('ZSCORE', KEYS[28], id) then
          -- (A flow parent waiting for its children is left as it is, as a leased task: placed,
          -- it would be claimed before them.) A call that names neither a priority nor a group
          -- keeps the task's own (replace moves the due time and the payload only); one that
          -- names them places it with those. What adds data is written before the unplacing.
          if hasPayload then redis.call('HSET', KEYS[3], id, payloadText) end
          -- Its own options likewise: those the call gives, merged with its own (mergedOpts).
          local own = redis.call('HGET', KEYS[12], id)
          if opts ~= '' then
            own = mergedOpts(own)
            redis.call('HSET', KEYS[12], id, own)
            local x = expiryOf(own)
            if x then redis.call('ZADD', KEYS[19], x, id) end
          end
          local m = unplace(id, info)
          if m and priority == 0 and group == '' then
            place(id, m.prio, m.group)
          else
            place(id, priority, group)
          end
          changed = true
          enqueued(id, nameOf(own))
        end
      end
    end
  end
  return added
end

-- Idle workers block on this list; one marker wakes one of them, and claim.lua passes it on
-- while ready tasks remain. Delayed tasks wake them too, so they can shorten their wait.
local function finishCall()
  variadic('HSET', KEYS[3], newPayloads)
  variadic('ZADD', KEYS[1], newDue)
  if tieN then redis.call('SET', KEYS[15], nowText .. ' ' .. tieN) end
  if changed and redis.call('LLEN', KEYS[6]) == 0 then redis.call('RPUSH', KEYS[6], '1') end
end

if ARGV[3] == '2' then
  local out = {}
  local i = 13
  while i <= #ARGV do
    local n = tonumber(ARGV[i])
    hasPayload, payloadText = ARGV[i + 1] == '1', ARGV[i + 2]
    local first, last = i + 3, i + 2 + n
    local size, max = overBound(first, last)
    if size then
      out[#out + 1] = size
      out[#out + 1] = max
    else
      local added = addIds(first, last)
      if entries then entries = entries + added end
      out[#out + 1] = added
      out[#out + 1] = -1
    end
    i = last + 1
  end
  finishCall()
  return out
end

local size, max = overBound(13, #ARGV)
if size then return {size, max} end
local added = addIds(13, #ARGV)
if dedupId ~= '' and added > 0 then
  local ttl = tonumber(ARGV[12])
  redis.call('HSET', KEYS[26], dedupId, ARGV[13] .. '|' .. (ttl > 0 and now + ttl or 0))
end
variadic('HDEL', KEYS[26], staleDedup)
finishCall()
return added
