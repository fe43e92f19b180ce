-- One step of a consumer: settles one leased task (ack, nack or release; optional), returns
-- expired leases (to the queue, or to the dead-letter set once they used up `maxAttempts`), then
-- leases up to `count` ready tasks. Workers call it once per finished task (ack-and-claim: one
-- round trip per task); `claim`, `ack`, `nack` and `release` are its special cases.
--
-- Where ready tasks are, and the order they are leased in:
--   prio    ready tasks with a priority (lower number sooner; FIFO by enqueue sequence within one)
--   due     tasks without priority or group, ready (due <= now) and delayed, by due time
--   gtasks  grouped tasks, one lexical range per group, in group sequence order
-- Negative priorities go first, then ungrouped and grouped tasks take turns (groups round-robin
-- through `ring`), then positive priorities.
--
-- KEYS[1]  due       zset: id -> due time (ms)
-- KEYS[2]  leased    zset: id -> lease expiry (ms)
-- KEYS[3]  payload   hash: id -> JSON payload
-- KEYS[4]  attempts  hash: id -> claims so far
-- KEYS[5]  tokens    hash: id -> lease token of the current lease
-- KEYS[6]  dead      zset: id -> time of death (ms)
-- KEYS[7]  wake      list: wake-up marker for idle workers (at most one element)
-- KEYS[8]  info      hash: id -> 'enqueuedAt' or 'enqueuedAt|dueAt|priority|seq|group'
-- KEYS[9]  errors    hash: id -> last error message
-- KEYS[10] pending   zset: id -> due time of delayed tasks with a priority or a group
-- KEYS[11] prio      zset: id -> (priority + 1000) * 2^41 + seq
-- KEYS[12] gtasks    zset (all scores 0): group \0 seq(15 digits) \0 id
-- KEYS[13] ring      zset: group -> turn (groups with ready tasks, served lowest turn first)
-- KEYS[14] gactive   hash: group -> tasks leased
-- KEYS[15] gpark     zset: group -> time its next task may start (retry backoff, group limiter)
-- KEYS[16] glimit    hash: group -> 'windowEnd|count' of the group limiter's current window
-- KEYS[17] limiter   zset: lease -> time it was granted (the queue limiter's sliding log)
-- KEYS[18] config    hash: 'paused' -> '1', 'concurrency' -> global limit of leased tasks,
--                    'limitedUntil' -> ms (Redis clock) before which no task is taken,
--                    'limiter' -> 'max:durationMs' set at runtime (wins over ARGV[7..8])
-- KEYS[19] done      zset: id -> end of its keepCompleted window (ms)
-- KEYS[20] events    stream: the queue's events (includes/events.lua)
-- KEYS[21] results   hash: id -> 'finishedAt|result JSON' of kept completed tasks
-- KEYS[22] progress  hash: id -> JSON of the last progress value
-- KEYS[23] opts      hash: id -> JSON of the task's own options and name ('"m":' maxAttempts is
--                    read here: a name's quotes are escaped, so it cannot fake it; 'n', the name,
--                    goes into the 'active' event)
-- KEYS[24] cancels   hash: id -> reason, for leased tasks a cancel was asked for
-- KEYS[25] cancelled zset: id -> time it was cancelled
-- KEYS[26] fence     string: highest lease fence given out
-- KEYS[27] logs      hash: id -> the task's log lines (task.log)
-- KEYS[28] dnext     hash: id -> JSON {dd, i, d, p?, o?}: the call a running task deduplicated
--                    with keepLastIfActive, added (task i, due in d ms) when it ends
-- KEYS[29] dedup     hash: deduplication id -> 'taskId|expiresAt' (the added task takes dd)
-- KEYS[30] parents   hash: child id -> JSON link to its flow parent (includes/flow.lua)
-- KEYS[31] outbox    list: child outcomes for parents this call has no keys of (flow.lua)
-- KEYS[32] flow      hash: parent id -> its children and their outcomes (forgotten with it)
-- KEYS[33] expired   zset: id -> time it expired (kept per keepCompleted)
-- KEYS[34] expiries  zset: id -> deadline of tasks enqueued with one (includes/expiry.lua); an
--                    entry goes when its task ends for good here (acked, dead, cancelled, expired)
-- KEYS[35..] groups of 12 keys of the queues of the settled tasks' parents (flow.lua's order):
--            a child that completes (or dies) advances its parent in this script when its
--            parent's queue is among them, else its outcome goes to the outbox
-- ARGV[1]  count            tasks to lease at most (0: settle and report only)
-- ARGV[2]  leaseMs
-- ARGV[3]  maxAttempts      a task whose attempt count reached this dies instead of retrying
--                           (a task's own maxAttempts, in opts, wins)
-- ARGV[4]  tokenBase        fresh unique value; the lease token of the i-th task is tokenBase:i
-- ARGV[5]  reclaimMax       expired leases returned per call at most
-- ARGV[6]  groupConcurrency tasks of one group leased at once at most
-- ARGV[7]  limiterMax       leases per limiterMs window (0: no queue limiter; the config's
--                           'limiter' wins)
-- ARGV[8]  limiterMs
-- ARGV[9]  groupLimiterMax  leases per group per groupLimiterMs window (0: none)
-- ARGV[10] groupLimiterMs
-- ARGV[11] keepDeadMs       dead and cancelled tasks older than this are deleted
-- ARGV[12] keepDeadCount    at most this many dead (and cancelled) tasks are kept, oldest go first
-- ARGV[13] keepCompletedMs  a completed (or expired) task is kept (result, payload) this long (0:
--                           not kept); meanwhile enqueue refuses its id
-- ARGV[14] keepCompletedCount  at most this many completed (and as many expired) tasks are kept
-- ARGV[15] eventsMaxLen     length of the event stream (0: no events)
-- ARGV[16..] settles, 6 values each: kind, id, lease token, the attempt it was leased as, delay
--            (ms), data. kind: 'ack' (data: result JSON or ''), 'nack' (failed: due again
--            `delay` later, or dead once out of attempts; data: error JSON), 'fail' (dead at once,
--            no retry; data: error JSON), 'release' (given back unattempted, due `delay` later;
--            data: '' or, for a QueueRateLimitError, the ms no task of the queue is taken, or 'u'
--            and the lease's fence for a task given back before its handler started: its start
--            is taken back from the queue limiter and its group's window).
--            A task a cancel was asked for ends cancelled on anything but an ack.
--
-- Expiry (includes/expiry.lua): a task whose deadline passed is never leased: it ends `expired`
-- (an `expired` event; its flow parent learns it as a failure) when a claim finds it, either
-- among the tasks this call would lease or, before leasing, among the waiting tasks whose deadline
-- passed (1,000 per call; when more remain, this call leases nothing and says to look again now).
-- Idle callers are told to look again at the earliest deadline, so expired tasks end even on a
-- paused queue with idle workers. Queues without task options pay nothing for it (one EXISTS for
-- the expiries set when the opts hash exists). A task that ends for good (acked: one ZREM per
-- call; dead or cancelled) leaves the expiries set at once; one that can wait again (a retry,
-- task.delay, a stalled lease given back) has its entry written again for the sweep.
--
-- Returns {nowMs, nextMs, settles, outbox, expired, stalledDead, settled_1..settled_settles, id_1,
-- score_1, attempt_1, token_1, payload_1, enqueuedAt_1, fence_1, opts_1, parent_1, ...}.
-- expired: tasks this call ended expired; stalledDead: expired leases it moved to the dead
-- letters (the caller counts them in the queue's metrics; it knows what its settles became).
-- outbox: 1 when this call pushed child outcomes to an outbox or this queue's outbox holds some
-- (the caller applies them: flow-apply.lua), else 0. parent_i: the task's link to its flow parent (JSON), or false.
-- nextMs (only when fewer than `count` were leased; else nowMs): when to look again: nowMs when
-- ready tasks remain, the time the limiter opens when it is what stops the caller, the earliest
-- due time, group unpark or lease expiry, or -1 when nothing is pending or the queue is paused.
-- settled_i: 1 acked / retried / released, 2 dead, 3 cancelled, 0 stale token. A payload is false when the task has none; enqueuedAt is
-- false when unknown; opts is false when the task has none. fence_i rises with every lease of the
-- queue (max of the last one + 1 and the Redis time in µs, so a failover that lost the counter
-- does not make it go back).

-- Numbers cross between strings and Lua numbers as seldom as possible: a Lua number given to
-- redis.call is formatted by Redis with %.17g (printf's floating-point path), which costs as much
-- as a small command, and every conversion in Lua costs ~2,000 instructions (strtod, or printf
-- for string.format). Numbers sent on every call (times, limits, attempts) go as strings, and an
-- argument a call's path may not need (a limit that is off, 0) becomes a number only when it does.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nowArg = string.format('%d', now)
local count = tonumber(ARGV[1])
local leaseMs = tonumber(ARGV[2])
local limiterMax = ARGV[7] == '0' and 0 or tonumber(ARGV[7])
local limiterMs = limiterMax == 0 and 0 or tonumber(ARGV[8])
local groupLimiterMax = ARGV[9] == '0' and 0 or tonumber(ARGV[9])
local groupLimiterMs = groupLimiterMax == 0 and 0 or tonumber(ARGV[10])
-- Made numbers at their first use, once per call: by a nack (maxAttemptsOf) and by a group's
-- lease (leaseFromGroup).
local maxAttempts, groupConcurrency = nil, nil

local eventsMaxLen = tonumber(ARGV[15])
-- The tokens hash holds, besides one field per leased task, the field '' (no task id is empty)
-- with this value, longer than Redis's hash-max-listpack-value (64 bytes by default): a hash with
-- a value that long is a hashtable, where a lease's HSET, HMGET and HDEL find a field in O(1).
-- Without it the hash of a few leases is a listpack, searched end to end for every field (4 % of
-- a drain's Redis instructions at concurrency 10). Written with each claim's leases, and kept
-- while tasks are leased; a call that ends the last lease and leases none deletes it.
local TOKENS_FILL = 'keeps this hash a hashtable: a value longer than hash-max-listpack-value'
-- Everything stored per task, deleted when it is forgotten (with its flow link: `forgetTasks`).
local TASK_HASHES = {KEYS[3], KEYS[4], KEYS[8], KEYS[9], KEYS[21], KEYS[22], KEYS[23], KEYS[27],
  KEYS[32]}
-- `plain`: none of the keys of the features a plain queue does not use exists (task options,
-- kept deduplicated calls, cancels, flows, delayed tasks with a priority or a group, parked
-- groups, priorities, groups with ready or leased tasks): one EXISTS for all of them in the common
-- case, instead of one per feature. It stays true until this call writes one of them (`unplain`);
-- while it holds, the checks below need no command of their own.
local plain = redis.call('EXISTS', KEYS[23], KEYS[28], KEYS[24], KEYS[30], KEYS[31], KEYS[10],
  KEYS[15], KEYS[11], KEYS[13], KEYS[14]) == 0
local function unplain()
  plain = false
end
-- Whether key k exists: false without a command while `plain` holds (k one of its keys).
local function present(k)
  return not plain and redis.call('EXISTS', k) == 1
end
local hasOpts, hasNext = present(KEYS[23]), present(KEYS[28])
local hasCancels = present(KEYS[24])
-- Tasks with a deadline wait in the queue (every one has options: looked for only then).
local hasExpiries = hasOpts and redis.call('EXISTS', KEYS[34]) == 1
-- Flows: whether any task of this queue has a parent, and whether its outbox holds outcomes.
local hasParents, outboxed = present(KEYS[30]), present(KEYS[31])
local parentGroups = hasParents and flowGroups(35)

-- Tasks this call forgot with TASK_HASHES: their links to a flow parent go at the end of the
-- call (`unlink`), after every `toParent` of the call (which reads the link of a task trimmed as
-- soon as it ended: keepDead / keepCompleted with a count of 0). A 'wait' child keeps its link
-- while it is kept (requeueDead); once deleted, nothing can count for its parent any more.
local unlinked = {}
local function forgetTasks(ids)
  forgetAll(TASK_HASHES, ids)
  if hasParents then
    for _, id in ipairs(ids) do unlinked[#unlinked + 1] = id end
  end
end
local function unlink()
  if #unlinked > 0 then variadic('HDEL', KEYS[30], unlinked) end
  unlinked = {}
end

-- Task `id` ended ('c' completed with result d, 'f' failed with error d): its parent learns it.
local function toParent(id, o, d)
  if hasParents and childEnded(KEYS[30], KEYS[31], parentGroups, id, o, d, now, eventsMaxLen) then
    outboxed = true
  end
end

-- Reads many ids per call (one call per key, not one per task), in chunks (finished.lua).
local function hmget(key, ids)
  -- One chunk (the usual case): the reply itself, not a copy of it.
  if #ids <= CHUNK then return redis.call('HMGET', key, unpack(ids)) end
  local out = {}
  for i = 1, #ids, CHUNK do
    for _, v in ipairs(redis.call('HMGET', key, unpack(ids, i, math.min(i + CHUNK - 1, #ids)))) do
      out[#out + 1] = v
    end
  end
  return out
end

-- A task's info (task-info.lua, put before this).
local function meta(id)
  return parseInfo(redis.call('HGET', KEYS[8], id))
end

local function groupHasTasks(g)
  return #redis.call('ZRANGEBYLEX', KEYS[12], '[' .. g .. '\0', '(' .. g .. '\1', 'LIMIT', 0, 1) > 0
end

local function toRing(g)
  if redis.call('ZSCORE', KEYS[15], g) or not groupHasTasks(g) then return end
  joinRing(KEYS[13], g)
end

-- A leased task of group g ended or was given back: the group may run its next one. Groups freed
-- by this call's settles rejoin the ring only after its claim, so that their next task goes to
-- another worker when one waits: a slow worker does not keep the same groups.
local freedGroups = nil
local function groupSlotFreed(g)
  unplain()
  if redis.call('HINCRBY', KEYS[14], g, -1) <= 0 then redis.call('HDEL', KEYS[14], g) end
  if freedGroups then freedGroups[#freedGroups + 1] = g else toRing(g) end
end

-- Deletes the group limiter's window of group g once it ended (bounds the hash).
local function dropEndedWindow(g)
  local w = redis.call('HGET', KEYS[16], g)
  if w and tonumber(string.match(w, '^(%d+)')) <= now then redis.call('HDEL', KEYS[16], g) end
end

-- The attempts a task may use: its own maxAttempts, else the caller's.
local function maxAttemptsOf(id)
  if hasOpts then
    local m = string.match(redis.call('HGET', KEYS[23], id) or '', '"m":(%d+)')
    if m then return tonumber(m) end
  end
  maxAttempts = maxAttempts or tonumber(ARGV[3])
  return maxAttempts
end

-- A leased task goes back to the queue, due at `at`. A grouped task takes its old place at the
-- head of its group, and the group waits until `at` (retries keep the group's order).
local function requeue(id, at)
  unplain()
  if hasOpts then
    -- Its deadline is indexed again (ZADD of the same score: idempotent): the sweep of a call
    -- made while it was leased (step 3b) drops the entry of a task it finds in no waiting set,
    -- and a task that fails after its deadline would then wait for its retry's due time instead
    -- of ending expired in this call's sweep. Only tasks with options pay (plain queues nothing).
    local x = expiryOf(redis.call('HGET', KEYS[23], id))
    if x then
      redis.call('ZADD', KEYS[34], x, id)
      hasExpiries = true
    end
  end
  local m = meta(id)
  if not m then
    redis.call('ZADD', KEYS[1], at, id)
  elseif m.group ~= '' then
    redis.call('ZADD', KEYS[12], 0, groupMember(m.group, m.seq, id))
    if at > now then
      redis.call('ZREM', KEYS[13], m.group)
      redis.call('ZADD', KEYS[15], 'GT', at, m.group)
    end
    groupSlotFreed(m.group)
  elseif at > now then
    redis.call('ZADD', KEYS[10], at, id)
  else
    redis.call('ZADD', KEYS[11], prioScore(m.prio, m.seq), id)
  end
end

-- A task that held a deduplication id ended: the last call it deduplicated with
-- keepLastIfActive (if any) is added now, as a plain task due in its delay, and holds the id.
-- A task id that exists already is not added again.
local function addKeptCall(id)
  if not hasNext then return end
  local v = redis.call('HGET', KEYS[28], id)
  if not v then return end
  redis.call('HDEL', KEYS[28], id)
  local c = cjson.decode(v)
  if redis.call('HSETNX', KEYS[8], c.i, now) == 0 then return end
  if c.p then redis.call('HSET', KEYS[3], c.i, c.p) end
  if c.o then
    redis.call('HSET', KEYS[23], c.i, c.o)
    -- Its deadline, if any, indexed as enqueue.lua does: a paused or idle queue expires it on time.
    local x = expiryOf(c.o)
    if x then redis.call('ZADD', KEYS[34], x, c.i) end
  end
  redis.call('ZADD', KEYS[1], now + c.d, c.i)
  redis.call('HSET', KEYS[29], c.dd, c.i .. '|0')
  if c.d > 0 then
    emit(KEYS[20], eventsMaxLen, 'enqueued', c.i, 'd', c.d)
  else
    emit(KEYS[20], eventsMaxLen, 'enqueued', c.i)
  end
  if redis.call('LLEN', KEYS[7]) == 0 then redis.call('RPUSH', KEYS[7], '1') end
end

-- A leased task ends in finished-set `zset` (dead, cancelled), kept per keepDead. It will not
-- wait again: its deadline's entry goes (a retry's stays: the sweep needs it).
local function finish(id, zset)
  unplain()
  if hasExpiries then redis.call('ZREM', KEYS[34], id) end
  addKeptCall(id)
  redis.call('ZADD', zset, now, id)
  local m = meta(id)
  if m and m.group ~= '' then groupSlotFreed(m.group) end
  forgetTasks(trimFinished(zset, now - tonumber(ARGV[11]), tonumber(ARGV[12])))
end

local function bury(id, attempt, err)
  finish(id, KEYS[6])
  emit(KEYS[20], eventsMaxLen, 'dead', id, 'a', attempt, 'e', err)
  toParent(id, 'f', err)
end

-- A leased task a cancel was asked for ends cancelled, with the cancel's reason as its error.
local function cancelLeased(id, reason)
  redis.call('HSET', KEYS[9], id, reason)
  redis.call('HDEL', KEYS[24], id)
  finish(id, KEYS[25])
  emit(KEYS[20], eventsMaxLen, 'cancelled', id, 'e', reason)
  toParent(id, 'f', reason)
end

-- Tasks that were not started by their deadline end expired, kept like completed ones
-- (keepCompleted): `expire` each, then `keepExpired` once for them all.
local expiredIds = {}
-- What this call ended that its caller cannot see in `settled` (result[5], result[6]).
local endedHere = {expired = 0, dead = 0}
-- As TASK_EXPIRED (task-errors.ts).
local EXPIRED_ERROR = '{"name":"TaskExpiredError","message":"expired before it started"}'
local function expire(id)
  addKeptCall(id)
  endedHere.expired = endedHere.expired + 1
  expiredIds[#expiredIds + 1] = id
  emit(KEYS[20], eventsMaxLen, 'expired', id)
  toParent(id, 'f', EXPIRED_ERROR)
end
local function keepExpired()
  if #expiredIds == 0 then return end
  local keepMs = tonumber(ARGV[13])
  if keepMs == 0 then
    forgetTasks(expiredIds)
  else
    local scored = {}
    for _, id in ipairs(expiredIds) do
      scored[#scored + 1] = now
      scored[#scored + 1] = id
    end
    variadic('ZADD', KEYS[33], scored)
    local keepCount = tonumber(ARGV[14])
    forgetTasks(trimFinished(KEYS[33], now - keepMs, keepCount,
      math.min(100, math.floor(keepCount / 10))))
  end
  expiredIds = {}
end

-- 1. Settle the caller's finished tasks: one read of their lease tokens; acks in a few variadic
-- calls for the whole batch; nacks and releases one by one (they are rare).
local settles = (#ARGV - 15) / 6
if count > 0 then freedGroups = {} end
local result = {now, now, settles, 0, 0, 0}
local freedSlot = false
-- A task given back before its handler started (a claim answered late, a name another instance
-- runs, a worker closing) did not start: its lease's start leaves the queue limiter's log, and its
-- group's window counts one start fewer when the lease was counted in it (leased since the window
-- opened: a fence is the Redis time of its lease in µs, or just above it). Else a short stall, or
-- every pass-on, would spend starts of a window that may last an hour. `task.delay()` and a
-- QueueRateLimitError keep their start: their handler ran.
local function unstart(id, token, fence)
  redis.call('ZREM', KEYS[17], token)
  if groupLimiterMax == 0 then return end
  local m = meta(id)
  if not m or m.group == '' then return end
  local e, c = string.match(redis.call('HGET', KEYS[16], m.group) or '', '^(%d+)|(%d+)$')
  if not e or tonumber(e) <= now or math.floor(fence / 1000) < tonumber(e) - groupLimiterMs then
    return
  end
  c = tonumber(c)
  if c < 1 then return end
  redis.call('HSET', KEYS[16], m.group, e .. '|' .. (c - 1))
  -- A full window parked the group until it ends (leaseFromGroup): it has room again.
  if c >= groupLimiterMax
      and tonumber(redis.call('ZSCORE', KEYS[15], m.group) or '0') == tonumber(e) then
    redis.call('ZREM', KEYS[15], m.group)
  end
end
-- `queues.rateLimit` / `QueueRateLimitError`: no task is taken before `untilMs` (a later limit
-- already set stays).
local function rateLimitQueue(untilMs)
  local current = tonumber(redis.call('HGET', KEYS[18], 'limitedUntil') or '0')
  if untilMs > current then redis.call('HSET', KEYS[18], 'limitedUntil', untilMs) end
end
-- A task put back due later (a retry's backoff, `task.delay`): idle workers must shorten their
-- wait to its due time, as enqueue.lua wakes them for a delayed task.
local dueLater = false
-- Whether this call deleted a lease token (see TOKENS_FILL).
local tokensRemoved = false
if settles > 0 then
  local ids = {}
  for i = 0, settles - 1 do ids[i + 1] = ARGV[17 + i * 6] end
  local tokens = hmget(KEYS[5], ids)
  local valid, acked, ackedAt, failedBefore, seen = {}, {}, {}, {}, {}
  for i = 0, settles - 1 do
    local at = 16 + i * 6
    local kind, id, attempt, data = ARGV[at], ARGV[at + 1], ARGV[at + 3], ARGV[at + 5]
    local settled = 0
    if tokens[i + 1] == ARGV[at + 2] and not seen[id] then
      seen[id] = true
      valid[#valid + 1] = id
      settled = 1
      freedSlot = true
      local cancel = hasCancels and kind ~= 'ack' and redis.call('HGET', KEYS[24], id)
      if cancel then
        cancelLeased(id, cancel)
        settled = 3
      elseif kind == 'ack' then
        acked[#acked + 1] = id
        ackedAt[#acked] = at
        -- Only a failed attempt leaves an error: a first attempt has none.
        if attempt ~= '1' then failedBefore[#failedBefore + 1] = id end
      elseif kind == 'nack' or kind == 'fail' then
        if data ~= '' then redis.call('HSET', KEYS[9], id, data) end
        if kind == 'fail' or tonumber(redis.call('HGET', KEYS[4], id) or '0') >= maxAttemptsOf(id) then
          bury(id, attempt, data)
          settled = 2
        else
          local delay = ARGV[at + 4]
          requeue(id, now + tonumber(delay))
          dueLater = true
          emit(KEYS[20], eventsMaxLen, 'retrying', id, 'a', attempt, 'e', data, 'd', delay)
        end
      else
        if redis.call('HINCRBY', KEYS[4], id, -1) <= 0 then redis.call('HDEL', KEYS[4], id) end
        local fence = string.match(data, '^u(%d+)$')
        if fence then
          unstart(id, ARGV[at + 2], tonumber(fence))
          data = ''
        end
        requeue(id, now + tonumber(ARGV[at + 4]))
        if data ~= '' then
          -- QueueRateLimitError: no task is taken until then, on any instance.
          rateLimitQueue(now + tonumber(data))
        else
          dueLater = true
          emit(KEYS[20], eventsMaxLen, 'delayed', id, 'd', ARGV[at + 4])
        end
      end
    elseif kind == 'ack' and not seen[id] and redis.call('ZSCORE', KEYS[19], id)
        and redis.call('HGET', KEYS[4], id) == attempt
        and string.sub(redis.call('HGET', KEYS[21], id) or '', -#data - 1) == '|' .. data then
      -- Completed (and kept) at this lease's attempt with this result: this same ack ran before
      -- (ioredis sends a command again when its connection closed before the reply; a promoted
      -- replica may have run the first). Any later lease would have counted another attempt.
      -- Acked, nothing more.
      seen[id] = true
      settled = 1
    end
    result[#result + 1] = settled
  end
  if dueLater and redis.call('LLEN', KEYS[7]) == 0 then redis.call('RPUSH', KEYS[7], '1') end
  if #valid > 0 then
    tokensRemoved = true
    variadic('ZREM', KEYS[2], valid)
    variadic('HDEL', KEYS[5], valid)
    if hasCancels then variadic('HDEL', KEYS[24], valid) end
  end
  if #acked > 0 then
    -- A grouped task leased leaves its group in gactive: while `plain` holds, none is.
    if not plain then
      for _, v in ipairs(hmget(KEYS[8], acked)) do
        local m = parseInfo(v)
        if m and m.group ~= '' then groupSlotFreed(m.group) end
      end
    end
    if #failedBefore > 0 then variadic('HDEL', KEYS[9], failedBefore) end
    -- Completed: the deadlines of the ones that had one go (a queue without deadlines pays nothing).
    if hasExpiries then variadic('ZREM', KEYS[34], acked) end
    if hasNext then
      for _, id in ipairs(acked) do addKeptCall(id) end
    end
    local keepMs = tonumber(ARGV[13])
    if keepMs > 0 then
      -- Kept with its payload, attempts and info, plus its result and finish time.
      -- Numbers made strings once per call, not once per task (a conversion costs as much as a
      -- small command in Redis's Lua).
      local kept, results = {}, {}
      local keptUntil, finishedAt = string.format('%d', now + keepMs), nowArg
      for i, id in ipairs(acked) do
        kept[#kept + 1] = keptUntil
        kept[#kept + 1] = id
        results[#results + 1] = id
        results[#results + 1] = finishedAt .. '|' .. ARGV[ackedAt[i] + 5]
      end
      variadic('ZADD', KEYS[19], kept)
      variadic('HSET', KEYS[21], results)
      -- Completed tasks are trimmed a tenth of the bound (at most 100) below it at a time.
      local keepCount = tonumber(ARGV[14])
      forgetTasks(trimFinished(KEYS[19], now, keepCount, math.min(100, math.floor(keepCount / 10))))
    else
      forgetAll({KEYS[3], KEYS[4], KEYS[8], KEYS[22], KEYS[23], KEYS[27], KEYS[32]}, acked)
    end
    if hasParents then
      for i, id in ipairs(acked) do toParent(id, 'c', ARGV[ackedAt[i] + 5]) end
    end
    if eventsMaxLen > 0 then
      for i, id in ipairs(acked) do
        local at = ackedAt[i]
        if ARGV[at + 5] ~= '' then
          emit(KEYS[20], eventsMaxLen, 'completed', id, 'a', ARGV[at + 3], 'r', ARGV[at + 5])
        else
          emit(KEYS[20], eventsMaxLen, 'completed', id, 'a', ARGV[at + 3])
        end
      end
    end
  end
end

local settleFreed = freedGroups
freedGroups = nil

-- 2. Return expired leases: a crashed worker's tasks come back without any janitor.
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', nowArg, 'LIMIT', '0', ARGV[5])
for _, id in ipairs(expired) do
  tokensRemoved = true
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[5], id)
  local cancel = hasCancels and redis.call('HGET', KEYS[24], id)
  if cancel then
    cancelLeased(id, cancel)
  else
    local attempt = redis.call('HGET', KEYS[4], id) or '0'
    redis.call('HSET', KEYS[9], id, 'lease expired')
    emit(KEYS[20], eventsMaxLen, 'stalled', id, 'a', attempt)
    if tonumber(attempt) >= maxAttemptsOf(id) then
      bury(id, attempt, 'lease expired')
      endedHere.dead = endedHere.dead + 1
    else
      requeue(id, now)
    end
  end
end

-- 3. Delayed tasks with a priority or a group, and parked groups, whose time has come.
if present(KEYS[10]) then
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[10], '-inf', now, 'LIMIT', 0, 1000)) do
    redis.call('ZREM', KEYS[10], id)
    local m = meta(id)
    if m and m.group ~= '' then
      redis.call('ZADD', KEYS[12], 0, groupMember(m.group, m.seq, id))
      toRing(m.group)
    elseif m then
      redis.call('ZADD', KEYS[11], prioScore(m.prio, m.seq), id)
    end
  end
end
if present(KEYS[15]) then
  for _, g in ipairs(redis.call('ZRANGEBYSCORE', KEYS[15], '-inf', now, 'LIMIT', 0, 1000)) do
    redis.call('ZREM', KEYS[15], g)
    dropEndedWindow(g)
    toRing(g)
  end
end
if groupLimiterMax > 0 then
  -- Windows of groups that went quiet: random looks at twice as many windows (and two more) as
  -- this call may open (one per task it leases), so that more ended windows go than new ones come
  -- while the hash is mostly ended windows: it stays about the size of the windows still open.
  -- One look per call let a queue of many groups grow the hash by every call's new windows, and
  -- every start renews its expiry.
  local looks = redis.call('HRANDFIELD', KEYS[16], string.format('%d', 2 * count + 2), 'WITHVALUES')
  local ended = {}
  for i = 1, #looks, 2 do
    if tonumber(string.match(looks[i + 1], '^(%d+)')) <= now then ended[#ended + 1] = looks[i] end
  end
  if #ended > 0 then variadic('HDEL', KEYS[16], ended) end
end

-- 3b. Waiting tasks whose deadline passed end expired (1,000 per call).
local expiryBacklog = false
if hasExpiries then
  local ids = redis.call('ZRANGEBYSCORE', KEYS[34], '-inf', now, 'LIMIT', 0, 1000)
  if #ids > 0 then
    variadic('ZREM', KEYS[34], ids)
    local W = {due = KEYS[1], pending = KEYS[10], prio = KEYS[11], gtasks = KEYS[12]}
    local opts, infos = hmget(KEYS[23], ids), hmget(KEYS[8], ids)
    for i, id in ipairs(ids) do
      local x = expiryOf(opts[i])
      if x and x <= now and unqueue(W, id, infos[i]) then expire(id) end
    end
    expiryBacklog = #ids == 1000
    keepExpired()
  end
end

-- 4. How many this call may lease: paused, global concurrency, queue limiter.
local n = expiryBacklog and 0 or count
local blockedUntil = nil -- set when a limit (not a lack of tasks) stops this caller
local config = redis.call('HMGET', KEYS[18], 'paused', 'concurrency', 'limitedUntil', 'limiter')
if config[4] then
  -- queues.setRateLimit: one limit for every worker of the queue, read at each claim.
  local max, ms = string.match(config[4], '^(%d+):(%d+)$')
  limiterMax, limiterMs = tonumber(max), tonumber(ms)
end
if config[1] == '1' then
  n = 0
  blockedUntil = -1
elseif config[3] and tonumber(config[3]) > now then
  n = 0
  blockedUntil = tonumber(config[3])
end
if n > 0 and config[2] then
  local room = tonumber(config[2]) - redis.call('ZCARD', KEYS[2])
  if room < n then n = math.max(room, 0) end
  if n == 0 then blockedUntil = -1 end
end
if n > 0 and limiterMax > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[17], '-inf', now - limiterMs)
  local used = redis.call('ZCARD', KEYS[17])
  local room = limiterMax - used
  if room < n then n = math.max(room, 0) end
  if n == 0 then
    -- A start fits once the (used - limiterMax + 1) oldest left the window (more than the
    -- oldest one after the limit was lowered at runtime).
    local edge = used - limiterMax
    blockedUntil = tonumber(redis.call('ZRANGE', KEYS[17], edge, edge, 'WITHSCORES')[2]) + limiterMs
  end
end

-- 5. Lease: the tasks are chosen first, then leased together in a few variadic calls. A task
-- chosen without a score (grouped, or with a priority) reports its due time from its info.
local taken = 0
local chosen, scores = {}, {}
-- Chosen tasks ended expired instead of being leased: ready ones may be left for this caller.
local expiredChosen = false
local function lease(id, score)
  taken = taken + 1
  chosen[taken] = id
  scores[taken] = score
end
local function leaseChosen()
  if taken == 0 then return end
  local opts = hasOpts and hmget(KEYS[23], chosen) or {}
  if hasOpts then
    -- A chosen task whose deadline passed ends expired instead (a retry, or one the sweep of
    -- step 3b has not reached).
    local keep, keptScores, keptOpts = {}, {}, {}
    for i, id in ipairs(chosen) do
      local x = expiryOf(opts[i])
      if x and x <= now then
        local m = meta(id)
        if m and m.group ~= '' then groupSlotFreed(m.group) end
        expire(id)
      else
        keep[#keep + 1] = id
        keptScores[#keep] = scores[i]
        keptOpts[#keep] = opts[i]
      end
    end
    if #keep < taken then
      keepExpired()
      expiredChosen = true
      chosen, scores, opts, taken = keep, keptScores, keptOpts, #keep
      if taken == 0 then return end
    end
  end
  local leases, tokens, limits = {}, {}, {}
  local leasedUntil = string.format('%d', now + leaseMs)
  for i, id in ipairs(chosen) do
    local token = string.format('%s:%d', ARGV[4], i)
    leases[#leases + 1] = leasedUntil
    leases[#leases + 1] = id
    tokens[#tokens + 1] = id
    tokens[#tokens + 1] = token
    if limiterMax > 0 then
      limits[#limits + 1] = nowArg
      limits[#limits + 1] = token
    end
  end
  variadic('ZADD', KEYS[2], leases)
  -- With the field that keeps the hash a hashtable (TOKENS_FILL).
  tokens[#tokens + 1] = ''
  tokens[#tokens + 1] = TOKENS_FILL
  variadic('HSET', KEYS[5], tokens)
  if limiterMax > 0 then variadic('ZADD', KEYS[17], limits) end
  local infos, payloads = hmget(KEYS[8], chosen), hmget(KEYS[3], chosen)
  -- Attempts: one read and one write for all the chosen tasks, not an HINCRBY each.
  local attempts, counted = hmget(KEYS[4], chosen), {}
  for i, id in ipairs(chosen) do
    -- A first attempt (the usual case) without making a number and a string.
    attempts[i] = attempts[i] and string.format('%d', tonumber(attempts[i]) + 1) or '1'
    counted[#counted + 1] = id
    counted[#counted + 1] = attempts[i]
  end
  variadic('HSET', KEYS[4], counted)
  local links = hasParents and hmget(KEYS[30], chosen) or {}
  -- Fences: above the last one given out and above the Redis time in µs. One SET ... GET while
  -- the time is past the last fence (the common case), a second SET when it is not.
  local fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('SET', KEYS[26], string.format('%d', fence + taken), 'GET') or '0')
  if last >= fence then
    fence = last
    redis.call('SET', KEYS[26], string.format('%d', fence + taken))
  end
  for i, id in ipairs(chosen) do
    result[#result + 1] = id
    local m = not scores[i] and parseInfo(infos[i])
    result[#result + 1] = scores[i] or (m and m.due) or now
    local attempt = attempts[i]
    result[#result + 1] = attempt
    result[#result + 1] = tokens[i * 2]
    result[#result + 1] = payloads[i]
    result[#result + 1] = infos[i] and string.match(infos[i], '^%d+') or false
    result[#result + 1] = fence + i
    result[#result + 1] = opts[i] or false
    result[#result + 1] = links[i] or false
    local name = opts[i] and string.find(opts[i], '"n":', 1, true) and cjson.decode(opts[i]).n
    if name then
      emit(KEYS[20], eventsMaxLen, 'active', id, 'a', attempt, 'n', name)
    else
      emit(KEYS[20], eventsMaxLen, 'active', id, 'a', attempt)
    end
  end
end

-- Takes the next task of the group at the head of the ring; false when the ring is empty.
local function leaseFromGroup()
  local g = redis.call('ZRANGE', KEYS[13], 0, 0)[1]
  if not g then return false end
  local active = tonumber(redis.call('HGET', KEYS[14], g) or '0')
  groupConcurrency = groupConcurrency or tonumber(ARGV[6])
  local head = redis.call('ZRANGEBYLEX', KEYS[12], '[' .. g .. '\0', '(' .. g .. '\1', 'LIMIT', 0, 2)
  if active >= groupConcurrency or #head == 0 then
    redis.call('ZREM', KEYS[13], g)
    return true
  end
  local full = active + 1 >= groupConcurrency or #head < 2
  if groupLimiterMax > 0 then
    local w = redis.call('HGET', KEYS[16], g)
    local wEnd, used = now + groupLimiterMs, 0
    if w then
      local e, c = string.match(w, '^(%d+)|(%d+)$')
      if tonumber(e) > now then wEnd, used = tonumber(e), tonumber(c) end
    end
    if used >= groupLimiterMax then
      redis.call('ZREM', KEYS[13], g)
      redis.call('ZADD', KEYS[15], wEnd, g)
      return true
    end
    redis.call('HSET', KEYS[16], g, wEnd .. '|' .. (used + 1))
    -- Every window ends within groupLimiterMs of its write: the hash goes once all have ended
    -- (also when no claimer with a group limiter comes back to clean it).
    if redis.call('PTTL', KEYS[16]) < groupLimiterMs then
      redis.call('PEXPIRE', KEYS[16], groupLimiterMs)
    end
    if used + 1 >= groupLimiterMax then
      redis.call('ZADD', KEYS[15], wEnd, g)
      full = true
    end
  end
  redis.call('ZREM', KEYS[12], head[1])
  redis.call('HINCRBY', KEYS[14], g, 1)
  lease(string.match(head[1], '^.-%z%d+%z(.*)$'))
  if full then
    redis.call('ZREM', KEYS[13], g)
  else
    local last = redis.call('ZRANGE', KEYS[13], -1, -1, 'WITHSCORES')[2]
    redis.call('ZADD', KEYS[13], 'XX', tonumber(last) + 1, g)
  end
  return true
end

local special = present(KEYS[11]) or present(KEYS[13])
-- Without priorities or groups: whether due holds ready tasks beyond the ones leased.
local dueMore = nil
if n > 0 then
  if not special then
    -- Only ungrouped tasks without priority: one range read, of one more than can be leased.
    local ready = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', nowArg, 'WITHSCORES', 'LIMIT', '0',
      string.format('%d', n + 1))
    for i = 1, math.min(#ready, 2 * n), 2 do lease(ready[i], ready[i + 1]) end
    dueMore = #ready > 2 * n
    variadic('ZREM', KEYS[1], chosen)
  else
    local groupTurn = true
    local ringEmpty = false
    local steps = 0
    -- The heads of prio and due, read again only once taken (a group's lease changes neither).
    local p, d = nil, nil
    while taken < n and steps < n * 4 + 1000 do
      steps = steps + 1
      p = p or redis.call('ZRANGE', KEYS[11], 0, 0, 'WITHSCORES')
      d = d or redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', nowArg, 'WITHSCORES', 'LIMIT', '0', '1')
      local pFirst = p[1] and tonumber(p[2]) < 1000 * PRIO_BASE
      if p[1] and (pFirst or (not d[1] and ringEmpty)) then
        redis.call('ZREM', KEYS[11], p[1])
        lease(p[1])
        p = nil
      elseif not ringEmpty and (groupTurn or not d[1]) then
        ringEmpty = not leaseFromGroup()
        groupTurn = false
      elseif d[1] then
        redis.call('ZREM', KEYS[1], d[1])
        lease(d[1], d[2])
        d = nil
        groupTurn = true
      else
        break
      end
    end
  end
  leaseChosen()
  if limiterMax > 0 then redis.call('PEXPIRE', KEYS[17], limiterMs) end
end

local rejoined = false
for _, g in ipairs(settleFreed or {}) do
  if redis.call('ZSCORE', KEYS[13], g) == false then
    toRing(g)
    rejoined = rejoined or redis.call('ZSCORE', KEYS[13], g) ~= false
  end
end

-- The links of the tasks this call forgot (every `toParent` of the call is behind).
unlink()

-- 6. When to look again, and whether to wake another idle worker.
if n > 0 and taken == n and count == n then
  -- The caller is full: it will not wait, so only pass the wake-up on if ready tasks remain
  -- (a burst is spread over every idle worker one round trip at a time).
  local more = present(KEYS[11]) or present(KEYS[13])
  if not more and dueMore ~= nil then
    more = dueMore
  elseif not more then
    more = #redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', nowArg, 'LIMIT', '0', '1') > 0
  end
  if more and redis.call('LLEN', KEYS[7]) == 0 then redis.call('RPUSH', KEYS[7], '1') end
  if outboxed then result[4] = 1 end
  result[5], result[6] = endedHere.expired, endedHere.dead
  return result
end
local nextAt = -1
local readyLeft = present(KEYS[11]) or present(KEYS[13])
local nextDue = redis.call('ZRANGE', KEYS[1], '0', '0', 'WITHSCORES')[2]
if readyLeft or (nextDue and tonumber(nextDue) <= now) then
  nextAt = now
elseif nextDue then
  nextAt = tonumber(nextDue)
end
for _, k in ipairs(plain and {} or {KEYS[10], KEYS[15]}) do
  local s = redis.call('ZRANGE', k, '0', '0', 'WITHSCORES')[2]
  if s and (nextAt == -1 or tonumber(s) < nextAt) then nextAt = math.max(tonumber(s), now) end
end
if nextAt == now and not rejoined and not expiredChosen and (taken < n or blockedUntil) then
  -- What is left could not be taken (a group or a limit stops it): wait for a settle or a limit.
  nextAt = blockedUntil or -1
end
if expiryBacklog then
  nextAt = now
elseif hasExpiries then
  -- The next deadline: an idle caller comes back to end the task that passes it.
  local x = redis.call('ZRANGE', KEYS[34], '0', '0', 'WITHSCORES')[2]
  if x and (nextAt == -1 or tonumber(x) < nextAt) then nextAt = math.max(tonumber(x), now) end
end
local nextLease = redis.call('ZRANGE', KEYS[2], '0', '0', 'WITHSCORES')[2]
if nextLease and nextAt ~= now and (nextAt == -1 or tonumber(nextLease) < nextAt) then
  nextAt = tonumber(nextLease)
end
if blockedUntil and blockedUntil > 0 and (nextAt == -1 or blockedUntil < nextAt) then
  nextAt = blockedUntil
end
result[2] = nextAt
-- The last lease ended and none began: the tokens hash holds only its fill; it goes.
if tokensRemoved and taken == 0 and redis.call('HLEN', KEYS[5]) == 1
    and redis.call('HEXISTS', KEYS[5], '') == 1 then
  redis.call('DEL', KEYS[5])
end
-- Ready tasks are left that this caller had no room for, or a settle freed a slot under a global
-- limit or of a group: wake the next idle worker.
if ((nextAt ~= -1 and nextAt <= now and not blockedUntil)
    or (freedSlot and count == 0 and (config[2] or readyLeft)))
  and redis.call('LLEN', KEYS[7]) == 0 then
  redis.call('RPUSH', KEYS[7], '1')
end
if outboxed then result[4] = 1 end
result[5], result[6] = endedHere.expired, endedHere.dead
return result
