-- Adds one instance's per-minute counts of a queue to its history (`QueueService.metrics`):
-- one call per queue and instance per minute, with the minutes that ended since its last call.
--
-- KEYS[1..] day      string per UTC day: the day's minutes, each a record (below), in minute
--                    order; expires 14 days after the day ended. ARGV names which KEYS[i] a
--                    minute belongs to.
-- ARGV[1] keepMs     how long a day's key lives after its day ended (14 days)
-- ARGV[2..] minutes, 10 values each: key index (into KEYS), its day's end (epoch ms), minute of
--           the day (0..1439), completed, failed, dead, expired, cancelled, p50 code, p95 code
--           (codes: 0 none, else 1 + round(log(ms + 1) / log(1.1)), at most 255)
--
-- A record: a byte of flags (bit 0 completed, 1 failed, 2 dead, 3 expired, 4 cancelled, 5 run
-- times, 6 the minute after the previous record's), then, unless bit 6, the varint of the
-- minutes skipped since the previous record's (the first record's previous minute is -1), the varint of each count flagged, and
-- the p50 and p95 codes (one byte each) when bit 5 is set. The common busy minute (the one after
-- the previous record's, only completed tasks, 1 to 32,767 of them) is a compact record of 4
-- bytes instead: 2 bytes of 0x8000 + completed (big-endian; flags bytes stay below 0x80), then
-- the two codes. Two
-- instances' run times of one minute merge as the mean of their codes weighted by completed
-- tasks (an instance's own percentiles are exact to its 10 % buckets).
--
-- Returns the number of minutes written.

local function readVarint(s, i)
  local v, shift = 0, 0
  while true do
    local b = string.byte(s, i)
    i = i + 1
    v = v + (b % 128) * 2 ^ shift
    if b < 128 then return v, i end
    shift = shift + 7
  end
end

local function varint(v)
  local out = {}
  repeat
    local b = v % 128
    v = math.floor(v / 128)
    out[#out + 1] = string.char(v > 0 and b + 128 or b)
  until v == 0
  return table.concat(out)
end

-- A day's records -> {minute -> {c, f, d, x, k, p50, p95}} and the sorted minutes.
local function decode(s)
  local byMinute, order = {}, {}
  local i, minute = 1, -1
  while s and i <= #s do
    local flags = string.byte(s, i)
    local r = {0, 0, 0, 0, 0, 0, 0}
    if flags >= 128 then
      minute = minute + 1
      r[1] = (flags - 128) * 256 + string.byte(s, i + 1)
      r[6], r[7] = string.byte(s, i + 2), string.byte(s, i + 3)
      i = i + 4
    else
      i = i + 1
      local skipped = 0
      if math.floor(flags / 64) % 2 == 0 then skipped, i = readVarint(s, i) end
      minute = minute + 1 + skipped
      for bit = 0, 4 do
        if math.floor(flags / 2 ^ bit) % 2 == 1 then r[bit + 1], i = readVarint(s, i) end
      end
      if math.floor(flags / 32) % 2 == 1 then
        r[6], r[7] = string.byte(s, i), string.byte(s, i + 1)
        i = i + 2
      end
    end
    byMinute[minute] = r
    order[#order + 1] = minute
  end
  return byMinute, order
end

local function encode(byMinute, order)
  table.sort(order)
  local out, prev = {}, -1
  for _, minute in ipairs(order) do
    local r = byMinute[minute]
    local flags, parts = 0, {}
    for bit = 0, 4 do
      if r[bit + 1] > 0 then
        flags = flags + 2 ^ bit
        parts[#parts + 1] = varint(r[bit + 1])
      end
    end
    if r[6] > 0 then
      flags = flags + 32
      parts[#parts + 1] = string.char(r[6], r[7])
    end
    if minute - prev == 1 and flags == 33 and r[1] < 32768 then
      out[#out + 1] = string.char(128 + math.floor(r[1] / 256), r[1] % 256, r[6], r[7])
    elseif minute - prev == 1 then
      out[#out + 1] = string.char(flags + 64) .. table.concat(parts)
    else
      out[#out + 1] = string.char(flags) .. varint(minute - prev - 1) .. table.concat(parts)
    end
    prev = minute
  end
  return table.concat(out)
end

local keepMs = tonumber(ARGV[1])
local days = {}
local written = 0
for a = 2, #ARGV, 10 do
  local k = tonumber(ARGV[a])
  local day = days[k]
  if not day then
    local byMinute, order = decode(redis.call('GET', KEYS[k]))
    day = {byMinute = byMinute, order = order, endsAt = tonumber(ARGV[a + 1])}
    days[k] = day
  end
  local minute = tonumber(ARGV[a + 2])
  local r = day.byMinute[minute]
  if not r then
    r = {0, 0, 0, 0, 0, 0, 0}
    day.byMinute[minute] = r
    day.order[#day.order + 1] = minute
  end
  local completed = tonumber(ARGV[a + 3])
  local p50, p95 = tonumber(ARGV[a + 8]), tonumber(ARGV[a + 9])
  if p50 > 0 then
    if r[6] > 0 and r[1] + completed > 0 then
      -- Weighted by completed tasks (a minute's run times come from its completed tasks).
      local w = completed / (r[1] + completed)
      p50 = math.floor(r[6] * (1 - w) + p50 * w + 0.5)
      p95 = math.floor(r[7] * (1 - w) + p95 * w + 0.5)
    end
    r[6], r[7] = p50, p95
  end
  for j = 1, 5 do r[j] = r[j] + tonumber(ARGV[a + 2 + j]) end
  written = written + 1
end
for k, day in pairs(days) do
  redis.call('SET', KEYS[k], encode(day.byMinute, day.order), 'PXAT', string.format('%.0f', day.endsAt + keepMs))
end
return written
