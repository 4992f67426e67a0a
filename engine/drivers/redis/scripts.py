"""The Lua scripts: every atomic step of the driver, loaded once and called by SHA.

Redis runs a script alone, so a script's reads and writes are one atomic step; nothing here
reads in one round trip and writes in another unless the write is guarded by a script that
re-checks what was read (`APPLY`). Numbers cross into Lua as strings and are written back with
`%d`, because Lua 5.1's `tostring` prints epoch milliseconds in exponent form.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import NoScriptError

from engine.drivers.redis.changes import CHANGED_FN
from engine.lease_expiry import LEASE_EXPIRED, LEASE_EXPIRED_FIELDS

# Guarded writes. ARGV[1]: JSON {"g": guards, "o": ops}. Every guard is checked first; the first
# that fails is answered as -(its index) and nothing is written. Else the ops run in order and
# the answer is how many conditional ops (`!hdel_if`) took effect. `!`-ops are the steps a
# command list cannot say (a sequence, a loop over a set, a condition). `!changed` signals
# followers (changes.py).
APPLY = (
    CHANGED_FN
    + r"""
local spec = cjson.decode(ARGV[1])
for i, g in ipairs(spec.g) do
  local kind = g[1]
  if kind == 'eq' then
    if redis.call('HGET', g[2], g[3]) ~= g[4] then return -i end
  elseif kind == 'absent' then
    if redis.call('HEXISTS', g[2], g[3]) == 1 then return -i end
  elseif kind == 'absent_or' then
    local v = redis.call('HGET', g[2], g[3])
    if v and v ~= g[4] then return -i end
  elseif kind == 'exists' then
    if redis.call('EXISTS', g[2]) == 0 then return -i end
  end
end
local done = 0
for _, op in ipairs(spec.o) do
  local cmd = op[1]
  if cmd == '!event' then
    -- op[5], when given, is the score (an event of no job: its `at`); else the sequence
    local seq = redis.call('INCR', op[3]) - 1
    redis.call('ZADD', op[2], op[5] or seq, string.format('%d', seq) .. '|' .. op[4])
  elseif cmd == '!release' then
    for _, k in ipairs(redis.call('SMEMBERS', op[2])) do
      redis.call('ZREM', op[3] .. k, op[4])
    end
    redis.call('DEL', op[2])
  elseif cmd == '!extend' then
    for _, k in ipairs(redis.call('SMEMBERS', op[2])) do
      redis.call('ZADD', op[3] .. k, 'XX', op[5], op[4])
    end
  elseif cmd == '!hdel_if' then
    if redis.call('HGET', op[2], op[3]) == op[4] then
      redis.call('HDEL', op[2], op[3])
      if op[5] then redis.call('ZREM', op[5], op[3]) end
      done = done + 1
    end
  elseif cmd == '!zadd_seq' then
    if not redis.call('ZSCORE', op[2], op[4]) then
      redis.call('ZADD', op[2], redis.call('INCR', op[3]), op[4])
    end
  elseif cmd == '!step' then
    redis.call('HSET', op[2], op[4], op[5])
    redis.call('HSETNX', op[3], op[4], redis.call('HLEN', op[3]))
  elseif cmd == '!ungroup' then
    -- a job leaves a dead/failed group; an emptied group leaves the list the reads walk
    if redis.call('ZREM', op[2], op[3]) == 1 and redis.call('EXISTS', op[2]) == 0 then
      redis.call('SREM', op[4], op[5])
    end
  elseif cmd == '!changed' then
    changed(op[2])
  else
    redis.call(unpack(op))
  end
end
return done
"""
)

# The live job holding dedupe field `dk`, or false; and, when the field names a job the live
# set lacks (another program's value: the driver keeps a field on live jobs alone), that name,
# which the caller answers as {'stale', dk, name} for `dedupe_index.mend` to set right.
LIVE_HOLDER_FN = r"""
local function live_holder(p, dk)
  local holder = redis.call('HGET', p .. 'dedupe', dk)
  if holder and redis.call('SISMEMBER', p .. 'live', holder) == 0 then return false, holder end
  return holder, false
end
"""

# A stale dedupe field set to `found` (a live job's id) or, with `found` '', removed; only
# while it still names `stale`. ARGV: prefix, field, stale, found.
MEND_DEDUPE = r"""
local p, dk, stale, found = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if redis.call('HGET', p .. 'dedupe', dk) ~= stale then return 0 end
if found ~= '' and redis.call('SISMEMBER', p .. 'live', found) == 1 then
  redis.call('HSET', p .. 'dedupe', dk, found)
else
  redis.call('HDEL', p .. 'dedupe', dk)
end
return 1
"""

# Enqueue a batch atomically with dedupe (rules 2, 3). ARGV: prefix, items JSON, outbox token,
# now. An item: {id, dk, oc, q, nm (name), tn (tenant, optional), rank, st, f (field/value
# list), ob (outbox row id, optional)}.
# An outbox item whose row `token` no longer holds (or that is published) is left out. Answers
# {'dup', index, holder} and writes nothing when an 'error' item conflicts; else one entry per
# item kept: {index, 'new'} | {index, 'held', id, run_id, state} | {index, 'earlier', index};
# just 1 when every item was kept and new (the usual answer, and the least to parse); and
# {'stale', field, name}, writing nothing, when a dedupe field names no live job.
# With ARGV[5] (a task), the batch is that task's occurrences, claimed in the same step: the
# task's last fired occurrence moves from ARGV[6] to ARGV[7] as TASK_CLAIM moves it, and a
# claim lost answers {'lost'}, writing nothing.
ENQUEUE = (
    CHANGED_FN
    + LIVE_HOLDER_FN
    + r"""
local p, token, now = ARGV[1], ARGV[3], ARGV[4]
local items = cjson.decode(ARGV[2])
local planned, out, fresh = {}, {}, {}
local task = ARGV[5]
if task then
  local raw = redis.call('HGET', p .. 'tasks', task)
  local last = raw and string.match(raw, '^(%-?%d+)|%-?%d+$')
  if (last and tonumber(last) or nil) ~= tonumber(ARGV[6]) then return {'lost'} end
end
for i, it in ipairs(items) do
  local keep = true
  if it.ob then
    local row = p .. 'ob:' .. it.ob
    keep = redis.call('HGET', row, 'claimed_by') == token
      and redis.call('HEXISTS', row, 'published_at') == 0
  end
  if keep then
    local holder, stale = live_holder(p, it.dk)
    if stale then return {'stale', it.dk, stale} end
    if holder then
      if it.oc == 'error' then return {'dup', i, holder} end
      local h = redis.call('HMGET', p .. 'job:' .. holder, 'run_id', 'state')
      table.insert(out, {i, 'held', holder, h[1], h[2]})
    elseif planned[it.dk] then
      if it.oc == 'error' then return {'dup', i, items[planned[it.dk]].id} end
      table.insert(out, {i, 'earlier', planned[it.dk]})
    else
      planned[it.dk] = i
      table.insert(out, {i, 'new'})
      table.insert(fresh, it)
    end
  end
end
if task then
  redis.call('HSET', p .. 'tasks', task, ARGV[7] .. '|' .. now)
  redis.call('HDEL', p .. 'taskfail', task)
end
for _, it in ipairs(fresh) do
  local k = p .. 'job:' .. it.id
  redis.call('HSET', k, unpack(it.f))
  redis.call('HSET', p .. 'dedupe', it.dk, it.id)
  redis.call('SADD', p .. 'live', it.id)
  redis.call('ZADD', p .. 'ids', 0, it.id)
  redis.call('ZADD', p .. 'byname:' .. it.nm, 0, it.id)
  if it.tn then redis.call('ZADD', p .. 'bytenant:' .. it.tn, 0, it.id) end
  redis.call('ZADD', p .. 'byqueue:' .. it.q, 0, it.id)
  redis.call('SADD', p .. 'queues', it.q)
  if it.st == 'ready' or it.st == 'delayed' then
    redis.call('ZADD', p .. 'q:' .. it.q, it.rank, it.id)
  end
end
for _, e in ipairs(out) do
  local it = items[e[1]]
  if it.ob then
    local id = it.id
    if e[2] == 'held' then id = e[3] elseif e[2] == 'earlier' then id = items[e[3]].id end
    redis.call('HSET', p .. 'ob:' .. it.ob, 'published_at', now, 'job_id', id)
    redis.call('ZREM', p .. 'obq', it.ob)
    redis.call('ZADD', p .. 'obpub', now, it.ob)
  end
end
if #fresh > 0 then
  redis.call('PUBLISH', p .. 'wake', '1')
  changed(p)
end
if #fresh == #items then return 1 end
return out
"""
)

# The event of an attempt lost to its lease (engine.lease_expiry), from the held row before the
# claim overwrites it: its data's fields are the row's stored values, in LEASE_EXPIRED_FIELDS'
# order. A value that is not JSON of the kind expected (another program's: the claim buries such
# a row) is written as null, so the job's history still reads.
_LOST_KINDS = {"attempt": "number", "worker_id": "string", "lease_expires_at": "number"}
_LOST_DATA = " .. ".join(
    f"'{',' if i > 1 else ''}{json.dumps(name)}:' .. stored(f[{i}], '{_LOST_KINDS[name]}')"
    for i, name in enumerate(LEASE_EXPIRED_FIELDS, 1)
)
_LOST_READ = ", ".join(f"'{name}'" for name in (*LEASE_EXPIRED_FIELDS, "tenant_id"))
LEASE_EXPIRED_FN = f"""
local function stored(text, kind)
  if not text then return 'null' end
  local ok, v = pcall(cjson.decode, text)
  if ok and type(v) == kind then return text end
  return 'null'
end
local function lease_expired(p, id, wid, now)
  local f = redis.call('HMGET', p .. 'job:' .. id, {_LOST_READ})
  local seq = redis.call('INCR', p .. 'evseq') - 1
  local text = '{{"job_id":' .. cjson.encode(id) .. ',"at":' .. string.format('%d', now)
    .. ',"kind":{json.dumps(LEASE_EXPIRED)},"actor":' .. wid
    .. ',"tenant_id":' .. stored(f[{len(LEASE_EXPIRED_FIELDS) + 1}], 'string')
    .. ',"data":{{' .. {_LOST_DATA} .. '}}}}'
  redis.call('ZADD', p .. 'ev:' .. id, seq, string.format('%d', seq) .. '|' .. text)
end
"""

# Claim (rule 13): due waiting rows from each queue's sorted set (scored by rules.claim_rank,
# ties by id) and running rows whose lease ran out, merged in claim order. ARGV: prefix, now,
# lease_ms, worker id (JSON), limit, queues JSON ('' for every queue), tokens JSON, and '1' to
# take over expired leases ('0' after an outage: engine/drivers/lease_grace.py). A running row
# it takes over gets the event of the attempt lost (LEASE_EXPIRED_FN) in this same script.
CLAIM = (
    CHANGED_FN
    + LEASE_EXPIRED_FN
    + r"""
local p, now, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local wid, limit = ARGV[4], tonumber(ARGV[5])
local queues
if ARGV[6] == '' then queues = redis.call('SMEMBERS', p .. 'queues')
else queues = cjson.decode(ARGV[6]) end
local tokens = cjson.decode(ARGV[7])
local wanted = {}
local cands = {}
-- Pauses (engine/pauses.py, pauses.py): a paused queue is skipped whole, a paused job name one
-- job at a time; expired leases too, since taking one over would start the job again. ARGV[9]
-- ('' for none) is the worker's full caps, [queues, names, tenants] (rules.is_excluded), left
-- alone alike.
local paused = redis.call('HLEN', p .. 'pauses') > 0
local excluding = ARGV[9] ~= ''
local ex_q, ex_n, ex_t = {}, {}, {}
if excluding then
  local x = cjson.decode(ARGV[9])
  for _, v in ipairs(x[1]) do ex_q[v] = true end
  for _, v in ipairs(x[2]) do ex_n[v] = true end
  for _, v in ipairs(x[3]) do ex_t[v] = true end
end
local function queue_held(q)
  if ex_q[q] then return true end
  return paused and redis.call('HEXISTS', p .. 'pauses', 'queue:' .. q) == 1
end
local function held(q, id)
  if not paused and not excluding then return false end
  if queue_held(q) then return true end
  local f = redis.call('HMGET', p .. 'job:' .. id, 'name', 'tenant_id')
  if not f[1] then return false end
  local name = cjson.decode(f[1])
  if excluding and (ex_n[name] or (f[2] and f[2] ~= 'null' and ex_t[cjson.decode(f[2])])) then
    return true
  end
  return paused and redis.call('HEXISTS', p .. 'pauses', 'job:' .. name) == 1
end
for _, q in ipairs(queues) do
  wanted[q] = true
  local found, offset = 0, 0
  while found < limit and not queue_held(q) do
    local ids = redis.call('ZRANGEBYSCORE', p .. 'q:' .. q, '-inf', now, 'WITHSCORES',
      'LIMIT', offset, 100)
    if #ids == 0 then
      -- An emptied queue leaves the walk of every queue until an enqueue names it again, so
      -- the walk costs the queues that hold jobs, not every name ever used.
      if offset == 0 and ARGV[6] == '' and redis.call('EXISTS', p .. 'q:' .. q) == 0 then
        redis.call('SREM', p .. 'queues', q)
      end
      break
    end
    for i = 1, #ids, 2 do
      local runat = tonumber(redis.call('HGET', p .. 'job:' .. ids[i], 'run_at'))
      if runat and runat <= now and not held(q, ids[i]) then
        table.insert(cands, {tonumber(ids[i + 1]), ids[i]})
        found = found + 1
        if found >= limit then break end
      end
    end
    offset = offset + 100
  end
end
local found, offset = 0, 0
while found < limit and ARGV[8] == '1' do
  local ids = redis.call('ZRANGEBYSCORE', p .. 'leases', '-inf', now, 'LIMIT', offset, 100)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local j = redis.call('HMGET', p .. 'job:' .. id, 'q', 'rank')
    if j[1] and (ARGV[6] == '' or wanted[j[1]]) and not held(j[1], id) then
      table.insert(cands, {tonumber(j[2]), id})
      found = found + 1
      if found >= limit then break end
    end
  end
  offset = offset + 100
end
table.sort(cands, function(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] end
  return a[2] < b[2]
end)
local out = {}
local expires = string.format('%d', now + lease)
for n = 1, math.min(limit, #cands) do
  local id = cands[n][2]
  local k = p .. 'job:' .. id
  local j = redis.call('HMGET', k, 'q', 'attempt', 'run_id', 'state')
  local attempt = tonumber(j[2]) + 1
  if j[4] == '"running"' then lease_expired(p, id, wid, now) end
  redis.call('HSET', k, 'state', '"running"', 'attempt', string.format('%d', attempt),
    'worker_id', wid, 'lease_expires_at', expires, 'cancel_requested', 'false',
    'updated_at', string.format('%d', now), 'token', tokens[n])
  redis.call('HINCRBY', k, 'ver', 1)
  redis.call('ZREM', p .. 'q:' .. j[1], id)
  redis.call('ZADD', p .. 'leases', expires, id)
  local has = 0
  if attempt > 1 or redis.call('EXISTS', p .. 'steps:' .. cjson.decode(j[3])) == 1 then
    has = 1
  end
  table.insert(out, {has, redis.call('HGETALL', k)})
end
if #out > 0 then changed(p) end
return out
"""
)

# All-or-nothing limiter slots. ARGV: prefix, job id, expires_at, now, then key/cap pairs.
# Answers the first key at its cap, or '' when every slot was taken.
ACQUIRE_SLOTS = r"""
local p, id, expires, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
for i = 5, #ARGV, 2 do
  local k = p .. 'slot:' .. ARGV[i]
  redis.call('ZREMRANGEBYSCORE', k, '-inf', now)
  local taken = redis.call('ZCARD', k)
  if redis.call('ZSCORE', k, id) then taken = taken - 1 end
  if taken >= tonumber(ARGV[i + 1]) then return ARGV[i] end
end
for i = 5, #ARGV, 2 do
  redis.call('ZADD', p .. 'slot:' .. ARGV[i], expires, id)
  redis.call('SADD', p .. 'jslots:' .. id, ARGV[i])
end
return ''
"""

# A leadership lease in a hash field, as "holder|expires_at". ARGV: key, field, holder, now,
# lease_ms. Taken when free, expired, or already this holder's; answers 1 while held. A value
# of another shape (another program's) is no lease.
LEAD = r"""
local raw = redis.call('HGET', ARGV[1], ARGV[2])
local now = tonumber(ARGV[4])
local sep = raw and string.find(raw, '|', 1, true)
if sep then
  local holder = string.sub(raw, 1, sep - 1)
  local expires = tonumber(string.sub(raw, sep + 1))
  if expires and holder ~= ARGV[3] and expires > now then return 0 end
end
redis.call('HSET', ARGV[1], ARGV[2], ARGV[3] .. '|' .. string.format('%d', now + tonumber(ARGV[5])))
return 1
"""

# A task's claim: compare-and-set from ARGV[3] ('' for no state; a value of another shape reads
# as none, as task_state reads it) to ARGV[4]; it deletes the task's failure (it fires again).
# ARGV: key, task, expected, occurrence, now, failures key.
TASK_CLAIM = r"""
local raw = redis.call('HGET', ARGV[1], ARGV[2])
local last, updated = nil, nil
if raw then last, updated = string.match(raw, '^(%-?%d+)|(%-?%d+)$') end
local current = last and tonumber(last) or nil
local expected = tonumber(ARGV[3])
if current ~= expected then return 0 end
redis.call('HSET', ARGV[1], ARGV[2], ARGV[4] .. '|' .. ARGV[5])
redis.call('HDEL', ARGV[6], ARGV[2])
return 1
"""

# Outbox claim: unpublished rows by (staged_at, id) whose claim is free or expired. ARGV:
# prefix, token, limit, now, lease_ms. Answers each claimed row's fields.
OUTBOX_CLAIM = r"""
local p, token, limit, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local expires = string.format('%d', now + tonumber(ARGV[5]))
local out, offset = {}, 0
while #out < limit do
  local ids = redis.call('ZRANGE', p .. 'obq', offset, offset + 99)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    local k = p .. 'ob:' .. id
    local until_ = tonumber(redis.call('HGET', k, 'claim_expires_at'))
    if until_ == nil or until_ <= now then
      redis.call('HSET', k, 'claimed_by', token, 'claim_expires_at', expires)
      table.insert(out, redis.call('HGETALL', k))
      if #out >= limit then break end
    end
  end
  offset = offset + 100
end
return out
"""


# --- optional capabilities (pauses read in CLAIM; inbound_events.py, rate_limits.py, reruns.py)

# Wake one waiting job (EventStore.wake_waiter): a suspended job's run_at (and queued_at) becomes
# `now` when later, its rank (rules.claim_rank: run_at - priority step) and queue score moving
# with it.
# Answers 0: not suspended; 1: suspended, already due; 2: moved.
_WAKE_FN = r"""
local function wake(p, id, now)
  local k = p .. 'job:' .. id
  local j = redis.call('HMGET', k, 'state', 'run_at', 'rank', 'q', 'queued_at')
  if j[1] ~= '"suspended"' then return 0 end
  local runat = tonumber(j[2])
  if runat <= now then return 1 end
  local rank = string.format('%d', tonumber(j[3]) - runat + now)
  local queued = string.format('%d', math.min(tonumber(j[5]), now))
  redis.call('HSET', k, 'run_at', string.format('%d', now), 'rank', rank, 'queued_at', queued)
  redis.call('HINCRBY', k, 'ver', 1)
  redis.call('ZADD', p .. 'q:' .. j[4], rank, id)
  redis.call('SADD', p .. 'queues', j[4])
  return 2
end
"""

# ARGV: prefix, job id, now. Answers 1 when the job is suspended (woken or already due).
WAKE_WAITER = (
    _WAKE_FN
    + CHANGED_FN
    + r"""
local r = wake(ARGV[1], ARGV[2], tonumber(ARGV[3]))
if r == 2 then
  redis.call('PUBLISH', ARGV[1] .. 'wake', '1')
  changed(ARGV[1])
end
if r > 0 then return 1 end
return 0
"""
)

# Store an event and wake its target's suspended waiters in one step. ARGV: prefix, event id,
# target, event JSON, sent_at, expires_at, now. Answers how many waiters were suspended.
SEND_EVENT = (
    _WAKE_FN
    + CHANGED_FN
    + r"""
local p, id, target, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[7])
redis.call('HSET', p .. 'inbound', id, ARGV[4])
redis.call('ZADD', p .. 'ie:' .. target, ARGV[5], id)
redis.call('ZADD', p .. 'inboundexp', ARGV[6], id)
local woken, moved = 0, false
for _, job in ipairs(redis.call('SMEMBERS', p .. 'waiting:' .. target)) do
  local r = wake(p, job, now)
  if r > 0 then woken = woken + 1 end
  if r == 2 then moved = true end
end
if moved then
  redis.call('PUBLISH', p .. 'wake', '1')
  changed(p)
end
return woken
"""
)

# A job's one waiter row. ARGV: prefix, job id, target ('' deletes the row), and 'gone' to
# delete it only while the job is not live (the pruner's check, made again in this step).
WAITER = r"""
local p, id, target = ARGV[1], ARGV[2], ARGV[3]
if ARGV[4] == 'gone' and redis.call('SISMEMBER', p .. 'live', id) == 1 then return 0 end
local old = redis.call('HGET', p .. 'waiters', id)
if old then redis.call('SREM', p .. 'waiting:' .. old, id) end
if target == '' then
  redis.call('HDEL', p .. 'waiters', id)
else
  redis.call('HSET', p .. 'waiters', id, target)
  redis.call('SADD', p .. 'waiting:' .. target, id)
end
return 1
"""


class Script:
    """One script: called by SHA, loaded again when the server answers NOSCRIPT (a restart or
    SCRIPT FLUSH forgot it)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    async def load(self, client: Redis) -> None:
        await client.script_load(self.source)

    async def __call__(self, client: Redis, args: Sequence[Any]) -> Any:
        try:
            return await client.evalsha(self.sha, 0, *args)
        except NoScriptError:
            await self.load(client)
            return await client.evalsha(self.sha, 0, *args)

    def queue(self, pipe: Pipeline, args: Sequence[Any]) -> None:
        pipe.evalsha(self.sha, 0, *args)


APPLY_SCRIPT = Script(APPLY)
ENQUEUE_SCRIPT = Script(ENQUEUE)
CLAIM_SCRIPT = Script(CLAIM)
ACQUIRE_SLOTS_SCRIPT = Script(ACQUIRE_SLOTS)
LEAD_SCRIPT = Script(LEAD)
TASK_CLAIM_SCRIPT = Script(TASK_CLAIM)
OUTBOX_CLAIM_SCRIPT = Script(OUTBOX_CLAIM)
WAKE_WAITER_SCRIPT = Script(WAKE_WAITER)
SEND_EVENT_SCRIPT = Script(SEND_EVENT)
WAITER_SCRIPT = Script(WAITER)
MEND_DEDUPE_SCRIPT = Script(MEND_DEDUPE)
ALL_SCRIPTS = (
    APPLY_SCRIPT,
    ENQUEUE_SCRIPT,
    CLAIM_SCRIPT,
    ACQUIRE_SLOTS_SCRIPT,
    LEAD_SCRIPT,
    TASK_CLAIM_SCRIPT,
    OUTBOX_CLAIM_SCRIPT,
    WAKE_WAITER_SCRIPT,
    SEND_EVENT_SCRIPT,
    WAITER_SCRIPT,
)
