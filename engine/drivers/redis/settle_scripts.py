"""The settles and operator actions as single scripts: ack, nack, heartbeat, cancel, retry.

Each reads the job and writes its next values in one EVALSHA, so a settle is one round trip and
nothing is read in Python first (no read-modify-write across round trips). engine.rules stays
the home of the rules: the state sets and event data these scripts consult are generated from
it below, the values only Python has (a nack's state, delay and event, all from NackOptions) are
computed there and passed in, and tests/redis/test_rules_agree.py pins every script to its rule.
Field values are the JSON text codec.py stores; numbers are written back with `%d`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from engine.drivers.redis.changes import CHANGED_FN
from engine.drivers.redis.scripts import LIVE_HOLDER_FN, Script
from engine.rules import (
    LIVE_STATES,
    PRIORITY_STEP_MS,
    SETTLING_STATES,
    WAITING_STATES,
    can_cancel,
    can_retry,
    cancel_event_data,
    retry_event_data,
)
from schemas.states import JOB_STATES, RUN_NOW_STATES, JobState


def _lua_str(text: str) -> str:
    # A JSON string literal is a valid Lua string literal for the ASCII text stored here.
    return json.dumps(text)


def _state(state: str) -> str:
    """A state as its hash field holds it (JSON text)."""
    return json.dumps(state)


def _set(states: Iterable[JobState]) -> str:
    return "{" + ",".join(f"[{_lua_str(_state(s))}]=true" for s in states) + "}"


def _data(rule: Callable[[JobState], object]) -> str:
    """A table: stored state -> the JSON text of the event data `rule` gives for it."""
    return (
        "{"
        + ",".join(
            f"[{_lua_str(_state(s))}]={_lua_str(json.dumps(rule(s), separators=(',', ':')))}"
            for s in JOB_STATES
        )
        + "}"
    )


# Shared by every script. ARGV[1] is the prefix and ARGV[2] the job id. `place` puts the job in
# the indexes its (new) state decides, as transitions.transition does for Python-built writes,
# and signals followers (changes.py).
_PRELUDE = (
    CHANGED_FN
    + LIVE_HOLDER_FN
    + f"""
local p, id = ARGV[1], ARGV[2]
local k = p .. 'job:' .. id
local LIVE = {_set(LIVE_STATES)}
local WAITING = {_set(WAITING_STATES)}
local SETTLING = {_set(SETTLING_STATES)}
local CANCELLABLE = {_set(s for s in JOB_STATES if can_cancel(s))}
local RETRYABLE = {_set(s for s in JOB_STATES if can_retry(s, False))}
local RETRYABLE_ALL = {_set(s for s in JOB_STATES if can_retry(s, True))}
local RUN_NOW = {_set(RUN_NOW_STATES)}
local CANCEL_DATA = {_data(cancel_event_data)}
local RETRY_DATA = {_data(retry_event_data)}
local STEP = {PRIORITY_STEP_MS}
local RUNNING = {_lua_str(_state("running"))}
local function fmt(n) return string.format('%d', n) end
local function rank_at(run_at)
  return fmt(tonumber(run_at) - tonumber(redis.call('HGET', k, 'priority')) * STEP)
end
local function dedupe_field(f)
  -- codec.dedupe_field from the stored JSON texts: [name, tenant or "", key]
  local tenant = f[2]
  if tenant == 'null' then tenant = '""' end
  return '[' .. f[1] .. ',' .. tenant .. ',' .. f[3] .. ']'
end
local function place(state)
  local f = redis.call('HMGET', k, 'q', 'rank', 'lease_expires_at', 'finished_at',
    'name', 'tenant_id', 'idempotency_key')
  local q = f[1]
  redis.call('ZREM', p .. 'q:' .. q, id)
  if WAITING[state] then
    redis.call('ZADD', p .. 'q:' .. q, f[2], id)
    redis.call('SADD', p .. 'queues', q)
  end
  if state == RUNNING and f[3] ~= 'null' then
    redis.call('ZADD', p .. 'leases', f[3], id)
  else
    redis.call('ZREM', p .. 'leases', id)
  end
  local dk = dedupe_field({{f[5], f[6], f[7]}})
  if LIVE[state] then
    redis.call('SADD', p .. 'live', id)
    redis.call('HSET', p .. 'dedupe', dk, id)
    redis.call('ZREM', p .. 'settled', id)
  else
    redis.call('SREM', p .. 'live', id)
    if redis.call('HGET', p .. 'dedupe', dk) == id then redis.call('HDEL', p .. 'dedupe', dk) end
    local finished = tonumber(f[4]) or 0
    redis.call('ZADD', p .. 'settled', fmt(finished), id)
  end
  -- its dead/failed group (codec.failing_group: state and tenant as stored, then the queue)
  for s in pairs(SETTLING) do
    if s ~= state then
      local group = s .. '\0' .. f[6] .. '\0' .. q
      local key = p .. 'fail:' .. group
      if redis.call('ZREM', key, id) == 1 and redis.call('EXISTS', key) == 0 then
        redis.call('SREM', p .. 'failgroups', group)
      end
    end
  end
  if SETTLING[state] then
    redis.call('SADD', p .. 'failing', id)
    local group = state .. '\0' .. f[6] .. '\0' .. q
    redis.call('ZADD', p .. 'fail:' .. group, 0, id)
    redis.call('SADD', p .. 'failgroups', group)
  else
    redis.call('SREM', p .. 'failing', id)
  end
  redis.call('HINCRBY', k, 'ver', 1)
  if LIVE[state] and state ~= RUNNING then redis.call('PUBLISH', p .. 'wake', '1') end
  changed(p)
end
local function release_slots()
  local js = p .. 'jslots:' .. id
  for _, s in ipairs(redis.call('SMEMBERS', js)) do redis.call('ZREM', p .. 'slot:' .. s, id) end
  redis.call('DEL', js)
end
local function event(ev, data)
  -- ev: the event's JSON without tenant_id and data, which come from the row here
  local seq = redis.call('INCR', p .. 'evseq') - 1
  local text = '{{"tenant_id":' .. redis.call('HGET', k, 'tenant_id') .. ',"data":' .. data
    .. ',' .. string.sub(ev, 2)
  redis.call('ZADD', p .. 'ev:' .. id, seq, fmt(seq) .. '|' .. text)
end
local function held(token)
  return redis.call('HGET', k, 'token') == token and redis.call('HGET', k, 'state') == RUNNING
end
-- A settle lets go of the lease and records whose lease it was: a try whose reply was lost,
-- sent again (`again` '1'), finds its own settle there (in `state`, unless nil) and succeeds.
local function settled_by(token)
  redis.call('HDEL', k, 'token')
  redis.call('HSET', k, 'settled_by', token)
end
local function landed(token, again, state)
  if again ~= '1' or redis.call('HGET', k, 'settled_by') ~= token then return false end
  return state == nil or redis.call('HGET', k, 'state') == state
end
-- A settle its token no longer fences: -1 when the job is not stored at all (the store lost
-- it: lost.py), else 0 (its lease moved on).
local function gone()
  if redis.call('EXISTS', k) == 0 then return -1 end
  return 0
end
local function find(has_tenant, tenant)
  local f = redis.call('HMGET', k, 'state', 'tenant_id')
  if not f[1] or (has_tenant == '1' and f[2] ~= tenant) then return nil end
  return f[1]
end
"""
)

# rules.ack_transition. ARGV: prefix, id, token, now, output JSON ('' keeps the stored one),
# '1' when an earlier try of this ack may have landed (its reply was lost). Answers 1, or 0 when
# the token no longer holds the running job (nothing written) and did not ack it, -1 when the
# job is not stored at all.
ACK = (
    _PRELUDE
    + """
local now = ARGV[4]
if not held(ARGV[3]) then
  if landed(ARGV[3], ARGV[6], '"done"') then return 1 end
  return gone()
end
redis.call('HSET', k, 'state', '"done"', 'updated_at', now, 'finished_at', now,
  'worker_id', 'null', 'lease_expires_at', 'null', 'last_error', 'null')
if ARGV[5] ~= '' then redis.call('HSET', k, 'output', ARGV[5]) end
settled_by(ARGV[3])
release_slots()
place('"done"')
return 1
"""
)

# rules.apply_nack. ARGV: prefix, id, token, now, then rules.nack_transition's values that do
# not depend on the row: state (JSON), run_at ('' keeps it), finished_at ('' keeps it),
# keeps_queued_at ('1'/'0'), counts_as_attempt ('1'/'0'), last_error JSON ('' keeps it); then
# the event ('' for none) and its data, '1' when the data takes the held row's attempt, and '1'
# when an earlier try may have landed. Answers the row's fields, or when the token no longer
# holds the running job and did not settle it 0, -1 when the job is not stored at all.
NACK = (
    _PRELUDE
    + """
local now, state, run_at, finished = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
if not held(ARGV[3]) then
  if landed(ARGV[3], ARGV[14], nil) then return redis.call('HGETALL', k) end
  return gone()
end
local held_attempt = tonumber(redis.call('HGET', k, 'attempt'))
local attempt = held_attempt
if ARGV[9] ~= '1' then attempt = math.max(held_attempt - 1, 0) end
redis.call('HSET', k, 'state', state, 'attempt', fmt(attempt), 'updated_at', now,
  'worker_id', 'null', 'lease_expires_at', 'null')
if run_at ~= '' then
  redis.call('HSET', k, 'run_at', run_at, 'rank', rank_at(run_at))
  if ARGV[8] ~= '1' then redis.call('HSET', k, 'queued_at', run_at) end
end
if finished ~= '' then redis.call('HSET', k, 'finished_at', finished) end
if ARGV[10] ~= '' then redis.call('HSET', k, 'last_error', ARGV[10]) end
if ARGV[11] ~= '' then
  local data = ARGV[12]
  if ARGV[13] == '1' then
    local rest = ''
    if data ~= '{}' then rest = ',' .. string.sub(data, 2, -2) end
    data = '{"attempt":' .. fmt(held_attempt) .. rest .. '}'
  end
  event(ARGV[11], data)
end
settled_by(ARGV[3])
release_slots()
place(state)
return redis.call('HGETALL', k)
"""
)

# Extend a lease. ARGV: prefix, id, token, expires_at. Answers {'ok'}, {'cancelled',
# lease_expires_at} when the job was cancelled under its holder (it keeps the token to hear it),
# {'lost'}, or {'gone'} when the job is not stored at all.
HEARTBEAT = (
    _PRELUDE
    + """
local f = redis.call('HMGET', k, 'token', 'state', 'lease_expires_at')
if f[1] ~= ARGV[3] then
  if gone() == -1 then return {'gone'} end
  return {'lost'}
end
if f[2] == '"cancelled"' then return {'cancelled', f[3]} end
if f[2] ~= RUNNING then return {'lost'} end
local expires = ARGV[4]
redis.call('HSET', k, 'lease_expires_at', expires)
redis.call('HINCRBY', k, 'ver', 1)
redis.call('ZADD', p .. 'leases', expires, id)
for _, s in ipairs(redis.call('SMEMBERS', p .. 'jslots:' .. id)) do
  redis.call('ZADD', p .. 'slot:' .. s, 'XX', expires, id)
end
return {'ok'}
"""
)

# rules.cancel_transition. ARGV: prefix, id, has_tenant ('1'/'0'), tenant (JSON), now, event
# JSON. Answers {'missing'} (rule 4: another tenant's too), {'refused', state}, or {'ok', fields}.
CANCEL = (
    _PRELUDE
    + """
local now = ARGV[5]
local state = find(ARGV[3], ARGV[4])
if not state then return {'missing'} end
if not CANCELLABLE[state] then return {'refused', state} end
local running = state == RUNNING
redis.call('HSET', k, 'state', '"cancelled"', 'cancel_requested', running and 'true' or 'false',
  'updated_at', now, 'finished_at', now)
-- a running holder keeps its token to hear the cancel on its next heartbeat
if not running then redis.call('HDEL', k, 'token') end
event(ARGV[6], CANCEL_DATA[state])
place('"cancelled"')
return {'ok', redis.call('HGETALL', k)}
"""
)

# rules.retry_transition. ARGV: prefix, id, has_tenant, tenant (JSON), now, include_cancelled
# ('1'/'0'), event JSON. Answers {'missing'}, {'refused', state}, {'dup', holder, name, tenant,
# key} when another live job holds its dedupe key, {'stale', field, name} when its dedupe field
# names no live job (scripts.LIVE_HOLDER_FN), or {'ok', fields}.
RETRY = (
    _PRELUDE
    + """
local now = ARGV[5]
local state = find(ARGV[3], ARGV[4])
if not state then return {'missing'} end
local allowed = RETRYABLE
if ARGV[6] == '1' then allowed = RETRYABLE_ALL end
if not allowed[state] then return {'refused', state} end
local f = redis.call('HMGET', k, 'name', 'tenant_id', 'idempotency_key')
local holder, stale = live_holder(p, dedupe_field(f))
if stale then return {'stale', dedupe_field(f), stale} end
if holder and holder ~= id then return {'dup', holder, f[1], f[2], f[3]} end
-- a job run now (RUN_NOW) keeps its attempt count; a settled one starts again from 0
if not RUN_NOW[state] then redis.call('HSET', k, 'attempt', '0') end
redis.call('HSET', k, 'state', '"ready"', 'run_at', now, 'queued_at', now,
  'updated_at', now, 'finished_at', 'null', 'cancel_requested', 'false', 'worker_id', 'null',
  'lease_expires_at', 'null', 'rank', rank_at(now))
redis.call('HDEL', k, 'token')
event(ARGV[7], RETRY_DATA[state])
place('"ready"')
return {'ok', redis.call('HGETALL', k)}
"""
)

ACK_SCRIPT = Script(ACK)
NACK_SCRIPT = Script(NACK)
HEARTBEAT_SCRIPT = Script(HEARTBEAT)
CANCEL_SCRIPT = Script(CANCEL)
RETRY_SCRIPT = Script(RETRY)
SETTLE_SCRIPTS = (ACK_SCRIPT, NACK_SCRIPT, HEARTBEAT_SCRIPT, CANCEL_SCRIPT, RETRY_SCRIPT)
