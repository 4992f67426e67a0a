"""Rerun from a step (engine/reruns.py) as ONE script: the plan and its writes in one step.

engine/reruns.plan_rerun stays the home of the rule; this is its transcription over the stored
row and steps, pinned to it by tests/redis/test_rerun_agreement.py (varied step histories, the
Redis result against plan_rerun's). The states a rerun takes come from `reruns.can_rerun`; the
row's next values are rules.retry_transition's (as RETRY writes them) in the new run, linked to
the old, its output gone. Only Python's values are passed in: now, the new run id, the step.

ARGV: prefix, id, has_tenant ('1'/'0'), tenant (JSON), now, from_step, include_cancelled
('1'/'0'), new run id, new run id as JSON, from_step as JSON, event JSON (without tenant and
data). Answers {'missing'}, {'refused', state}, {'unknown', old run id, step names in run
order...}, {'unreached', old run id, step, status}, {'dup', holder, name, tenant, key}, {'stale',
field, name} (scripts.LIVE_HOLDER_FN), {'damaged', old run id, step, why} (a step's value is
not a step record), or {'ok', fields}.
"""

from __future__ import annotations

from engine.drivers.redis.scripts import Script
from engine.drivers.redis.settle_scripts import _PRELUDE, _set  # the settles' shared Lua
from engine.reruns import can_rerun
from schemas.states import JOB_STATES

RERUN = (
    _PRELUDE
    + f"""
local RERUNNABLE = {_set(s for s in JOB_STATES if can_rerun(s, False))}
local RERUNNABLE_ALL = {_set(s for s in JOB_STATES if can_rerun(s, True))}
"""
    + r"""
local now, from_step, new_run, new_run_json = ARGV[5], ARGV[6], ARGV[8], ARGV[9]
local state = find(ARGV[3], ARGV[4])
if not state then return {'missing'} end
local allowed = RERUNNABLE
if ARGV[7] == '1' then allowed = RERUNNABLE_ALL end
if not allowed[state] then return {'refused', state} end
local old_run_json = redis.call('HGET', k, 'run_id')
local old_run = cjson.decode(old_run_json)
-- The run's steps in run order: started_at, then first-save position (steps.ordered_steps).
local texts = redis.call('HGETALL', p .. 'steps:' .. old_run)
local positions = {}
local raw = redis.call('HGETALL', p .. 'steppos:' .. old_run)
for i = 1, #raw, 2 do positions[raw[i]] = tonumber(raw[i + 1]) end
local steps = {}
for i = 1, #texts, 2 do
  -- A value another program wrote: named, for the driver to answer STORE_DAMAGED.
  local read, s = pcall(cjson.decode, texts[i + 1])
  if not read or type(s) ~= 'table' or type(s.status) ~= 'string'
      or type(s.started_at) ~= 'number' then
    return {'damaged', old_run, texts[i], read and 'not a step record' or tostring(s)}
  end
  table.insert(steps, {name = texts[i], text = texts[i + 1], status = s.status,
    started = s.started_at, pos = positions[texts[i]] or 0})
end
table.sort(steps, function(a, b)
  if a.started ~= b.started then return a.started < b.started end
  if a.pos ~= b.pos then return a.pos < b.pos end
  return a.name < b.name
end)
local at = nil
for i, s in ipairs(steps) do
  if s.name == from_step then at = i break end
end
if at == nil then
  local out = {'unknown', old_run}
  for _, s in ipairs(steps) do table.insert(out, s.name) end
  return out
end
-- The kept steps as the new run stores them: their run_id moved to the new run.
local old_tag, new_tag = '"run_id":' .. old_run_json, '"run_id":' .. new_run_json
local copies = {}
for i = 1, at - 1 do
  local step = steps[i]
  if step.status ~= 'completed' then
    return {'unreached', old_run, step.name, step.status}
  end
  local s, e = string.find(step.text, old_tag, 1, true)
  -- A step stored under a run names that run; one that does not is a corrupt row: stop.
  if not s then return redis.error_reply('step ' .. step.name .. ' does not name its run') end
  copies[i] = string.sub(step.text, 1, s - 1) .. new_tag .. string.sub(step.text, e + 1)
end
local f = redis.call('HMGET', k, 'name', 'tenant_id', 'idempotency_key')
local holder, stale = live_holder(p, dedupe_field(f))
if stale then return {'stale', dedupe_field(f), stale} end
if holder and holder ~= id then return {'dup', holder, f[1], f[2], f[3]} end
-- Copied in run order, so the new run's first-save positions keep it.
for i, text in ipairs(copies) do
  redis.call('HSET', p .. 'steps:' .. new_run, steps[i].name, text)
  redis.call('HSETNX', p .. 'steppos:' .. new_run, steps[i].name,
    redis.call('HLEN', p .. 'steppos:' .. new_run))
end
redis.call('HSET', k, 'state', '"ready"', 'attempt', '0', 'run_at', now, 'queued_at', now,
  'updated_at', now, 'finished_at', 'null', 'cancel_requested', 'false', 'worker_id', 'null',
  'lease_expires_at', 'null', 'rank', rank_at(now), 'run_id', new_run_json,
  'rerun_of', old_run_json, 'output', 'null')
redis.call('HDEL', k, 'token')
-- The old run's id joins its job's runs, so retention deletes its steps with the job.
redis.call('SADD', p .. 'runs:' .. id, old_run)
event(ARGV[11], '{"from":' .. state .. ',"from_step":' .. ARGV[10] .. ',"previous_run_id":'
  .. old_run_json .. ',"run_id":' .. new_run_json .. '}')
place('"ready"')
return {'ok', redis.call('HGETALL', k)}
"""
)

RERUN_SCRIPT = Script(RERUN)
