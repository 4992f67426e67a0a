"""Reads: one job, a page of jobs, a job's trace page."""

from __future__ import annotations

import json

from engine import paging
from engine.drivers.redis.codec import decode_record, dumps
from engine.drivers.redis.operator import find
from engine.drivers.redis.scripts import Script
from engine.drivers.redis.steps import ordered_steps
from engine.drivers.redis.store import Store
from engine.rules import SETTLING_STATES
from schemas.events import EventRecord
from schemas.jobs import JobFilter, JobPage, JobRecord
from schemas.trace import TracePage, TraceQuery

# Ids one call of the list script examines at most: a few milliseconds of the server's time.
_LIST_CHUNK = 5_000

# ARGV: ids zset, job key prefix, the lex bound to walk down from, ids to examine at most, ids
# to answer at most, then the filters as stored or '' for any: states (JSON list of stored
# state texts), name (JSON), queue (JSON), tenant_id (JSON). Answers {last id examined or '',
# 1 when no id is left below it, the ids that pass, newest first}. The filters are _wanted's,
# applied to four fields, so a filter that matches few rows reads no record it drops.
LIST = r"""
local ids = redis.call('ZREVRANGEBYLEX', ARGV[1], ARGV[3], '-', 'LIMIT', 0, tonumber(ARGV[4]))
local states = nil
if ARGV[6] ~= '' then
  states = {}
  for _, s in ipairs(cjson.decode(ARGV[6])) do states[s] = true end
end
local queue = nil
if ARGV[8] ~= '' then queue = cjson.decode(ARGV[8]) end
local want = tonumber(ARGV[5])
local out = {'', 0}
local n = 0
for i, id in ipairs(ids) do
  out[1] = id
  local f = redis.call('HMGET', ARGV[2] .. id, 'state', 'name', 'q', 'tenant_id')
  if f[1] and (states == nil or states[f[1]]) and (ARGV[7] == '' or f[2] == ARGV[7])
     and (queue == nil or f[3] == queue) and (ARGV[9] == '' or f[4] == ARGV[9]) then
    out[#out + 1] = id
    n = n + 1
    if n >= want then
      if i == #ids and #ids < tonumber(ARGV[4]) then out[2] = 1 end
      return out
    end
  end
end
if #ids < tonumber(ARGV[4]) then out[2] = 1 end
return out
"""
LIST_SCRIPT = Script(LIST)

# The same for a list of dead or failed jobs only, through their groups (keys.py), so it reads
# those jobs and no other. ARGV: prefix, the lex bound, ids to examine per group at most, ids to
# answer at most, then the filters as for LIST (states: dead and/or failed). Answers as LIST
# does, or {-1} when the groups do not hold exactly the `failing` ids (an earlier build's rows,
# until migrate regroups them): the caller walks every id then. Each matching group gives its
# newest ids below the bound; merged newest first, they are complete down to the highest of the
# last ids of the groups that had more, where the next call goes on.
LIST_FAILING = r"""
local p = ARGV[1]
local states = {}
for _, s in ipairs(cjson.decode(ARGV[5])) do states[s] = true end
local queue = nil
if ARGV[7] ~= '' then queue = cjson.decode(ARGV[7]) end
local total, matching = 0, {}
for _, group in ipairs(redis.call('SMEMBERS', p .. 'failgroups')) do
  total = total + redis.call('ZCARD', p .. 'fail:' .. group)
  local a = string.find(group, '\0', 1, true)
  local b = string.find(group, '\0', a + 1, true)
  if states[string.sub(group, 1, a - 1)] and (queue == nil or string.sub(group, b + 1) == queue)
     and (ARGV[8] == '' or string.sub(group, a + 1, b - 1) == ARGV[8]) then
    matching[#matching + 1] = group
  end
end
if total ~= redis.call('SCARD', p .. 'failing') then return {-1} end
local chunk = tonumber(ARGV[3])
local merged, horizon = {}, nil
for _, group in ipairs(matching) do
  local ids = redis.call('ZREVRANGEBYLEX', p .. 'fail:' .. group, ARGV[2], '-', 'LIMIT', 0, chunk)
  for _, id in ipairs(ids) do merged[#merged + 1] = id end
  if #ids == chunk and (horizon == nil or ids[#ids] > horizon) then horizon = ids[#ids] end
end
table.sort(merged, function(x, y) return x > y end)
local want = tonumber(ARGV[4])
local out = {'', 0}
local n = 0
for _, id in ipairs(merged) do
  if horizon ~= nil and id < horizon then break end
  out[1] = id
  if ARGV[6] == '' or redis.call('HGET', p .. 'job:' .. id, 'name') == ARGV[6] then
    out[#out + 1] = id
    n = n + 1
    if n >= want then return out end
  end
end
if horizon == nil then out[2] = 1 end
return out
"""
LIST_FAILING_SCRIPT = Script(LIST_FAILING)


async def get(store: Store, job_id: str, tenant_id: str | None) -> JobRecord:
    return (await find(store, job_id, tenant_id))[0]


def _wanted(job: JobRecord, f: JobFilter) -> bool:
    return (
        (f.states is None or job.state in f.states)
        and (f.name is None or job.name == f.name)
        and (f.queue is None or job.queue == f.queue)
        and (f.tenant_id is None or job.tenant_id == f.tenant_id)
    )


async def list_jobs(store: Store, f: JobFilter) -> JobPage:
    """Newest first, walked down from the cursor: through the dead and failed groups when the
    filter wants only those states, else through every id (the list script)."""
    keys = store.keys
    name = "" if f.name is None else dumps(f.name)
    queue = "" if f.queue is None else dumps(f.queue)
    tenant = "" if f.tenant_id is None else dumps(f.tenant_id)
    states = "" if f.states is None else json.dumps([dumps(s) for s in f.states])
    failing_only = f.states is not None and set(f.states) <= set(SETTLING_STATES)
    found: list[JobRecord] = []
    upper = "+" if f.cursor is None else f"({f.cursor}"
    while len(found) <= f.limit:
        want = f.limit + 1 - len(found)
        if failing_only:
            args = [keys.prefix, upper, _LIST_CHUNK, want, states, name, queue, tenant]
            out = await LIST_FAILING_SCRIPT(store.client, args)
            if out == [-1]:
                failing_only = False
                continue
        else:
            args = [keys.ids, keys.job(""), upper, _LIST_CHUNK, want, states, name, queue, tenant]
            out = await LIST_SCRIPT(store.client, args)
        last, exhausted, ids = str(out[0]), int(out[1]), [str(i) for i in out[2:]]
        rows = await store.hgetall_many([keys.job(i) for i in ids])
        # A row may have moved since the script read it: the filter is applied again.
        found.extend(j for j in (decode_record(r) for r in rows if r) if _wanted(j, f))
        if exhausted or not last:
            break
        upper = f"({last}"
    page = found[: f.limit]
    more = len(found) > f.limit
    return JobPage(jobs=page, next_cursor=page[-1].id if more and page else None)


async def load_trace(
    store: Store, job_id: str, tenant_id: str | None, page: TraceQuery | None
) -> TracePage:
    job = await get(store, job_id, tenant_id)
    page = page or TraceQuery()
    steps = await ordered_steps(store, job.run_id)
    before_steps = (
        steps
        if page.steps_cursor is None
        else [t for t in steps if (t[0], t[1]) < paging.parse_step_cursor(page.steps_cursor)]
    )
    step_page = before_steps[-page.steps_limit :]
    key = store.keys.events(job_id)
    top = (
        "+inf"
        if page.events_cursor is None
        else f"({paging.parse_event_cursor(page.events_cursor)}"
    )
    raw = await store.zrevrangebyscore(key, top, page.events_limit)
    events = [_event(member) for member in reversed(raw)]
    total = int(await store.client.zcard(key))
    more_events = (
        bool(events) and int(await store.client.zcount(key, "-inf", f"({events[0][0]}")) > 0
    )
    more_steps = len(before_steps) > len(step_page)
    return TracePage(
        job=job,
        steps=[t[2] for t in step_page],
        events=[e for _, e in events],
        steps_total=len(steps),
        events_total=total,
        steps_cursor=paging.step_cursor(*step_page[0][:2]) if more_steps else None,
        events_cursor=paging.event_cursor(events[0][0]) if more_events else None,
    )


def _event(member: str) -> tuple[int, EventRecord]:
    seq, _, text = member.partition("|")
    return int(seq), EventRecord.model_validate_json(text)
