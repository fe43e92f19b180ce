-- A line of waiting processes, for locks and semaphores alike: put before each script that reads,
-- joins or renews one when it is loaded (LINE_PRELUDE, lib/waiting/waiting-scripts.ts).
--
-- line (zset: token -> arrival order), entries (hash: token -> "deadlineMs:<spec>", the spec being
-- what the script that grants needs to know of the waiter).

-- Redis TIME in ms, read at most once per script and only when it is needed (clock()); the same
-- reading in microseconds, as a string (clockMicros(), a fence's seed: fence-counter.lua).
local clockMs, clockUs = nil, nil
local function clock()
  if not clockMs then
    -- The milliseconds are the microseconds' digits but the last three: one number made from a
    -- string, where seconds * 1000 + floor(micros / 1000) made two and a floor.
    clockUs = timeMicros(redis.call('TIME'))
    clockMs = tonumber(string.sub(clockUs, 1, -4))
  end
  return clockMs
end
local function clockMicros()
  clock()
  return clockUs
end

-- Numbers reach Redis as strings made with '%d' (integers): a plain number argument or
-- concatenation formats it with '%.14g', which costs the server several times more.

-- Writes the entry of `token` ("deadlineMs:<spec>"), live until `now` + `entryTtl` ms; the line
-- lives as long as someone renews it.
local function renewEntry(line, entries, token, spec, entryTtl, now)
  redis.call('HSET', entries, token, string.format('%d:%s', now + entryTtl, spec))
  local keep = string.format('%d', entryTtl * 2)
  redis.call('PEXPIRE', line, keep)
  redis.call('PEXPIRE', entries, keep)
end

-- Puts `token` at the end of `line` with its entry (see renewEntry). Score = last score + 1:
-- strict arrival order, independent of clocks; NX keeps the place of a waiter only checking again.
-- Every join renews the line's expiry, a newcomer's too: on a busy lock each waiter may get the
-- lock before its first renewal (LINE_RENEW_MS), so the joins alone keep the line alive (left to
-- the renewals, it expired under the waiters every 6 s: their entries vanished, and a check again
-- that crossed the renewal finding it gone left an old entry at the head for an entry's TTL).
local function joinLine(line, entries, token, spec, entryTtl, now)
  local last = redis.call('ZRANGE', line, '-1', '-1', 'WITHSCORES')[2]
  redis.call('ZADD', line, 'NX', string.format('%d', (tonumber(last) or 0) + 1), token)
  renewEntry(line, entries, token, spec, entryTtl, now)
end

-- The first waiter in `line` whose entry is still live at `now` (ms), its entry, and whether
-- anyone (live or not) stands behind it; entries of waiters that stopped renewing (crashed,
-- frozen, gave up) are dropped on the way, not waited for. nil when nobody live waits.
local function liveHead(line, entries, now)
  while true do
    local first = redis.call('ZRANGE', line, '0', '1')
    local head = first[1]
    if not head then return nil, nil, false end
    local entry = redis.call('HGET', entries, head)
    if entry and tonumber(string.match(entry, '^%d+')) >= now then
      return head, entry, first[2] ~= nil
    end
    redis.call('ZREM', line, head)
    redis.call('HDEL', entries, head)
  end
end
