-- Applies child outcomes recorded in an outbox (includes/flow.lua) to their parent, all of one
-- parent queue. Idempotent: an outcome applied twice counts once.
--
-- With ARGV[1] '1' (the outbox shares the parent's slot: one node, or one hash tag):
-- KEYS[1]      outbox  list: the child queue's outbox; each entry is applied only if this call
--                      removes it (LREM), so concurrent callers apply it once
-- KEYS[2..13]  the parent queue's group: due, wake, events, dead, errors, wchildren, cdone, flow,
--              parents, outbox, opts, expiries
-- With ARGV[1] '0' (another Cluster slot): KEYS[1..12] the parent queue's group; the caller
-- removes the entries from the child queue's outbox afterwards.
-- ARGV[2]  eventsMaxLen
-- ARGV[3..] entries, as read from the outbox (JSON {q, p, b, m, c, o, d})
--
-- Returns how many applied outcomes made a parent die and pushed to the parent queue's outbox
-- (its own parent is told next).

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local withOutbox = ARGV[1] == '1'
local P = flowKeys(withOutbox and 2 or 1)
local maxLen = tonumber(ARGV[2])
local pushed = 0
for i = 3, #ARGV do
  if not withOutbox or redis.call('LREM', KEYS[1], 1, ARGV[i]) == 1 then
    if applyChild(P, cjson.decode(ARGV[i]), now, maxLen) then pushed = pushed + 1 end
  end
end
return pushed
