"""The rate-limit take (engine/rate_limits.py) as ONE script: reservations, GCRA and writes.

engine/rate_limits.py stays the home of the rule; this is its transcription, pinned to it by
tests/redis/test_rate_agreement.py (random takes against the memory driver, which calls it).
Times are epoch µs below 2^53, so Lua 5.1's doubles are exact for + - *; every division is the
exact floor division `fdiv` (Python's `//`, negative operands included), never a bare `/`.
The constants come from the Python module, so they cannot drift.

ARGV: prefix, now (ms), job id ('' for none), job id as JSON, up_to, the take's keys as JSON
(`keys_of`), then per take: key, key as JSON, limit, per_ms, burst. Answers {blocked key ('' for
none), next_start_at, spare}.
"""

from __future__ import annotations

from engine.drivers.redis.scripts import Script
from engine.rate_limits import ADOPT_AFTER_MS, LATE_MIN_US

RATE_TAKE = (
    f"""
local ADOPT_AFTER_MS = {ADOPT_AFTER_MS}
local LATE_MIN_US = {LATE_MIN_US}
"""
    + r"""
local p, now, job = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local job_json, up_to, keys_json = ARGV[4], tonumber(ARGV[5]), ARGV[6]
local adopt_key = p .. 'rsvadopt:' .. cjson.decode(keys_json)
local function fmt(n) return string.format('%d', n) end
-- Python's a // b for b > 0: the double quotient's floor, corrected by the exact remainder.
local function fdiv(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  if r < 0 then q = q - 1 elseif r >= b then q = q + 1 end
  return q
end
local function ceil_ms(us) return -fdiv(-us, 1000) end
local takes = {}
for i = 7, #ARGV, 5 do
  local t = {key = ARGV[i], json = ARGV[i + 1], limit = tonumber(ARGV[i + 2]),
    per = tonumber(ARGV[i + 3]), burst = tonumber(ARGV[i + 4])}
  t.interval = fdiv(t.per * 1000, t.limit)
  t.tolerance = (t.burst - 1) * t.interval
  table.insert(takes, t)
end
local function gcra(tat, at_us, t)
  local current = at_us
  if tat ~= nil and tat > at_us then current = tat end
  local allow_at = current - t.tolerance
  return current + t.interval, allow_at
end
-- A stored value another program wrote reads as none (rate_limits.stored_state and
-- stored_reservation): a TAT is taken afresh and written anew, a reservation dropped.
local function decoded(text)
  local ok, r = pcall(cjson.decode, text)
  if ok and type(r) == 'table' then return r end
  return {}
end
local function tat_of(text)
  local tat = decoded(text)[2]
  if type(tat) == 'number' then return tat end
  return nil
end
local function reservation(id)
  local text = redis.call('GET', p .. 'rsv:' .. id)
  if not text then return nil end
  local r = decoded(text)
  if type(r[2]) ~= 'number' or type(r[3]) ~= 'number' or type(r[4]) ~= 'string'
      or type(r[5]) ~= 'string' then
    return {id = id, damaged = true}
  end
  return {id = id, slot = r[2], late = r[3], blocked = r[4], keys = r[5]}
end
local function drop(r)
  redis.call('DEL', p .. 'rsv:' .. r.id)
  redis.call('ZREM', p .. 'rsvslot', r.id)
  redis.call('ZREM', p .. 'rsvlate', r.id)
  if r.keys then redis.call('ZREM', p .. 'rsvadopt:' .. r.keys, r.id) end
end

-- Void reservations (late_at < now) are deleted by every take.
local void, void_rows = {}, {}
local void_ids = redis.call('ZRANGEBYSCORE', p .. 'rsvlate', '-inf', fmt(now - 1))
for _, id in ipairs(void_ids) do
  void[id] = true
  local r = reservation(id)
  if r then table.insert(void_rows, r) end
end
local drops, blocked, next_at, spare, decided = {}, nil, now, 0, false
if job ~= '' then
  local own = nil
  if not void[job] then own = reservation(job) end
  if own ~= nil and own.damaged then
    table.insert(drops, own)
    own = nil
  end
  -- rate_limits.use_reservation
  if own ~= nil and own.late >= now then
    decided = true
    if own.slot <= now then
      table.insert(drops, own)
    else
      blocked, next_at = own.blocked, own.slot
    end
  else
    if own ~= nil then table.insert(drops, own) end
    -- rate_limits.adoptable: same keys (this set), slot_at <= now - ADOPT_AFTER_MS, not void
    local due = redis.call('ZRANGEBYSCORE', adopt_key, '-inf', fmt(now - ADOPT_AFTER_MS),
      'LIMIT', 0, #void_ids + 2)
    for _, id in ipairs(due) do
      if not void[id] and id ~= job then
        local r = reservation(id)
        if r and r.damaged then
          table.insert(drops, r)
        elseif r then
          table.insert(drops, r)
          decided = true
          break
        end
      end
    end
  end
end
local new, keep = {}, nil
if not decided then
  -- rate_limits.take_all
  local tats = {}
  for _, t in ipairs(takes) do
    local text = redis.call('GET', p .. 'rate:' .. t.key)
    if text then tats[t.key] = tat_of(text) end
  end
  local now_us = now * 1000
  local slot = now_us
  for _, t in ipairs(takes) do
    local _, allow_at = gcra(tats[t.key], now_us, t)
    if allow_at > slot then blocked, slot = t, allow_at end
  end
  if blocked == nil or job ~= '' then
    local count = 1
    if blocked == nil and up_to > 1 then
      count = up_to
      for _, t in ipairs(takes) do
        -- rate_limits.starts_allowed
        local _, allow_at = gcra(tats[t.key], now_us, t)
        local n = math.min(up_to, 1 + fdiv(now_us - allow_at, t.interval))
        if n < count then count = n end
      end
    end
    for _, t in ipairs(takes) do
      new[t] = gcra(tats[t.key], slot, t) + (count - 1) * t.interval
    end
    spare = count - 1
  end
  if blocked ~= nil then
    next_at = ceil_ms(slot)
    if job ~= '' then
      -- rate_limits.late_window_ms
      local widest = nil
      for _, t in ipairs(takes) do
        local w = t.tolerance + math.max(t.interval, LATE_MIN_US)
        if widest == nil or w > widest then widest = w end
      end
      keep = {slot = next_at, late = next_at + ceil_ms(widest), blocked = blocked}
    end
    blocked = blocked.key
  end
end
for _, r in ipairs(void_rows) do drop(r) end
for _, r in ipairs(drops) do drop(r) end
if keep ~= nil then
  local row = '[' .. job_json .. ',' .. fmt(keep.slot) .. ',' .. fmt(keep.late) .. ','
    .. keep.blocked.json .. ',' .. keys_json .. ']'
  redis.call('SET', p .. 'rsv:' .. job, row)
  redis.call('ZADD', p .. 'rsvslot', fmt(keep.slot), job)
  redis.call('ZADD', p .. 'rsvlate', fmt(keep.late), job)
  redis.call('ZADD', adopt_key, fmt(keep.slot), job)
end
for _, t in ipairs(takes) do
  if new[t] ~= nil then
    redis.call('SET', p .. 'rate:' .. t.key, '[' .. t.json .. ',' .. fmt(new[t]) .. ','
      .. fmt(t.limit) .. ',' .. fmt(t.per) .. ',' .. fmt(t.burst) .. ']')
    redis.call('ZADD', p .. 'ratekeys', 0, t.key)
  end
end
return {blocked or '', fmt(next_at), spare}
"""
)

RATE_TAKE_SCRIPT = Script(RATE_TAKE)
