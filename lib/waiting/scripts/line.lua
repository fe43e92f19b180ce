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
    local t = redis.call('TIME')
    clockMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    clockUs = timeMicros(t)
  end
  return clockMs
end
local function clockMicros()
  clock()
  return clockUs
end

-- Numbers reach Redis as strings made with '%d' (integers): a plain number argument or
-- concatenation formats it with '%.14g', which costs the server several times more.

-- Writes the entry of `token` ("deadlineMs:<spec>"), live until `now` + `entryTtl` ms.
local function writeEntry(entries, token, spec, entryTtl, now)
  redis.call('HSET', entries, token, string.format('%d:%s', now + entryTtl, spec))
end

-- writeEntry, and the line lives on for twice `entryTtl`: it lives as long as someone renews it.
local function renewEntry(line, entries, token, spec, entryTtl, now)
  writeEntry(entries, token, spec, entryTtl, now)
  local keep = string.format('%d', entryTtl * 2)
  redis.call('PEXPIRE', line, keep)
  redis.call('PEXPIRE', entries, keep)
end

-- Puts `token` at the end of `line` with its entry (see renewEntry). Score = last score + 1:
-- strict arrival order, independent of clocks; NX keeps the place of a waiter only checking again,
-- and that check renews the line. A newcomer to a line that exists leaves the line's expiry as it
-- is (two commands fewer on each join of a busy line): every process waiting in it renews it each
-- LINE_RENEW_MS (renew.lua, or its check again) to twice an entry's TTL, and so will the
-- newcomer's. Line and entries are written and expire together, so an existing line has its
-- entries hash, with the same expiry. Only a line whose every waiter stopped renewing can expire
-- before the newcomer's first renewal; that renewal finds the token out of line and the process
-- joins again, as after any dropped entry.
local function joinLine(line, entries, token, spec, entryTtl, now)
  local last = redis.call('ZRANGE', line, '-1', '-1', 'WITHSCORES')[2]
  local added = redis.call('ZADD', line, 'NX', string.format('%d', (tonumber(last) or 0) + 1), token)
  if last and added == 1 then
    writeEntry(entries, token, spec, entryTtl, now)
  else
    renewEntry(line, entries, token, spec, entryTtl, now)
  end
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
