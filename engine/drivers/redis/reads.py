"""Reads: one job, a page of jobs, a job's trace page."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import cast

from engine import paging
from engine.drivers.damage import UNDECODABLE, UndecodableRow, read_or_name
from engine.drivers.redis.codec import decode_record, dumps
from engine.drivers.redis.connection import Fixes
from engine.drivers.redis.operator import find
from engine.drivers.redis.scripts import Script
from engine.drivers.redis.steps import ordered_steps
from engine.drivers.redis.store import Store
from engine.rules import LIVE_STATES, SETTLING_STATES
from schemas.events import EventRecord
from schemas.jobs import DamagedJob, JobFilter, JobPage, JobRecord
from schemas.trace import TracePage, TraceQuery

# Ids one call of the list script examines at most: a few milliseconds of the server's time.
_LIST_CHUNK = 5_000
_INDEX_CHUNK = 1_000

# A list's filter as the stored texts, from ARGV[at] on: states (JSON list of stored state
# texts), name (JSON), queue (JSON), tenant_id (JSON), each '' for any. `matcher(at)` answers a
# test of one job key against it, on four fields, so a filter that matches few rows reads no
# record it drops. The filters are _wanted's.
_MATCH_FN = r"""
local function matcher(at)
  local states = nil
  if ARGV[at] ~= '' then
    states = {}
    for _, s in ipairs(cjson.decode(ARGV[at])) do states[s] = true end
  end
  local name, queue, tenant = ARGV[at + 1], nil, ARGV[at + 3]
  if ARGV[at + 2] ~= '' then queue = cjson.decode(ARGV[at + 2]) end
  return function(key)
    local f = redis.call('HMGET', key, 'state', 'name', 'q', 'tenant_id')
    return f[1] and (states == nil or states[f[1]]) and (name == '' or f[2] == name)
      and (queue == nil or f[3] == queue) and (tenant == '' or f[4] == tenant)
  end
end
"""

# ARGV: ids zset, job key prefix, the lex bound to walk down from, ids to examine at most, ids
# to answer at most, then the filter (_MATCH_FN). Answers {last id examined or '', 1 when no id
# is left below it, the ids that pass, newest first}.
LIST = (
    _MATCH_FN
    + r"""
local ids = redis.call('ZREVRANGEBYLEX', ARGV[1], ARGV[3], '-', 'LIMIT', 0, tonumber(ARGV[4]))
local matches = matcher(6)
local want = tonumber(ARGV[5])
local out = {'', 0}
local n = 0
for i, id in ipairs(ids) do
  out[1] = id
  if matches(ARGV[2] .. id) then
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
)
LIST_SCRIPT = Script(LIST)

# Jobs stored before the name, tenant and queue indexes existed join them (migrate, once per
# INDEX_VERSION). ARGV: prefix, then ids; a job deleted meanwhile joins nothing.
INDEX_NAMES = r"""
local p = ARGV[1]
for i = 2, #ARGV do
  local f = redis.call('HMGET', p .. 'job:' .. ARGV[i], 'name', 'tenant_id', 'q')
  if f[1] then
    redis.call('ZADD', p .. 'byname:' .. cjson.decode(f[1]), 0, ARGV[i])
    if f[2] and f[2] ~= 'null' then
      redis.call('ZADD', p .. 'bytenant:' .. cjson.decode(f[2]), 0, ARGV[i])
    end
    if f[3] then redis.call('ZADD', p .. 'byqueue:' .. f[3], 0, ARGV[i]) end
  end
end
return #ARGV - 1
"""
INDEX_NAMES_SCRIPT = Script(INDEX_NAMES)
# What INDEX_NAMES builds: 1 the name and tenant indexes, 2 the queue index too.
INDEX_VERSION = "2"

# A list of live jobs walks the live set, a chunk a call (SSCAN), not the history: bounded by
# what is live however much has run. ARGV: live set, job key prefix, SSCAN cursor, ids to
# examine, the id the page goes below ('' for the first page), then the filter (_MATCH_FN).
# Answers {next cursor ('0' at the end), the ids that pass, in no order}.
LIST_LIVE = (
    _MATCH_FN
    + r"""
local matches = matcher(6)
local r = redis.call('SSCAN', ARGV[1], ARGV[3], 'COUNT', tonumber(ARGV[4]))
local out = {r[1]}
for _, id in ipairs(r[2]) do
  if (ARGV[5] == '' or id < ARGV[5]) and matches(ARGV[2] .. id) then out[#out + 1] = id end
end
return out
"""
)
LIST_LIVE_SCRIPT = Script(LIST_LIVE)

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


async def list_jobs(store: Store, f: JobFilter, fixes: Fixes) -> JobPage:
    """Newest first, walked down from the cursor: through the dead and failed groups when the
    filter wants only those states, else through the ids of its job name or tenant, or every
    id (the list script). A filter that wants only live states walks a short chunk of the
    newest ids (a backlog's rows are there), then, if its page is not full and fewer jobs are
    live than ids are left below, the live set."""
    keys = store.keys
    walk = await _shortest_walk(store, f)
    name = "" if f.name is None else dumps(f.name)
    queue = "" if f.queue is None else dumps(f.queue)
    tenant = "" if f.tenant_id is None else dumps(f.tenant_id)
    states = "" if f.states is None else json.dumps([dumps(s) for s in f.states])
    filters = [states, name, queue, tenant]
    failing_only = f.states is not None and set(f.states) <= set(SETTLING_STATES)
    live_only = f.states is not None and set(f.states) <= set(LIVE_STATES)
    found: list[JobRecord | DamagedJob] = []

    def passing(rows: list[dict[str, str]]) -> list[JobRecord | DamagedJob]:
        # A row may have moved since the script read it: the filter is applied again. One that
        # cannot be read is named where it stands (the script's filter read its plain fields).
        read = (read_or_name(r, decode_record, fixes.damaged) for r in rows if r)
        return [j for j in read if isinstance(j, DamagedJob) or _wanted(j, f)]

    upper = "+" if f.cursor is None else f"({f.cursor}"
    walked = False
    while len(found) <= f.limit:
        want = f.limit + 1 - len(found)
        if failing_only:
            args = [keys.prefix, upper, _LIST_CHUNK, want, *filters]
            out = await LIST_FAILING_SCRIPT(store.client, args)
            if out == [-1]:
                failing_only = False
                continue
        elif live_only and walked and await _fewer_live(store, walk, upper):
            below = upper.removeprefix("(")
            found.extend(await _live_rows(store, filters, below, want, passing))
            break
        else:
            # A live list's first chunk is short: where it finds no full page, the live set may
            # be the shorter walk.
            chunk = min(_LIST_CHUNK, 10 * want) if live_only and not walked else _LIST_CHUNK
            args = [walk, keys.job(""), upper, chunk, want, *filters]
            out = await LIST_SCRIPT(store.client, args)
            walked = True
        last, exhausted, ids = str(out[0]), int(out[1]), [str(i) for i in out[2:]]
        found.extend(passing(await store.hgetall_many([keys.job(i) for i in ids])))
        if exhausted or not last:
            break
        upper = f"({last}"
    return paging.cut_page(found, f.limit)


async def _shortest_walk(store: Store, f: JobFilter) -> str:
    """The id set a list pages through: of the filter's name, tenant and queue indexes, the one
    holding the fewest ids; every id when the filter names none of them."""
    keys = store.keys
    walks = [
        *([keys.by_name(f.name)] if f.name is not None else []),
        *([keys.by_tenant(f.tenant_id)] if f.tenant_id is not None else []),
        *([keys.by_queue(f.queue)] if f.queue is not None else []),
    ]
    if len(walks) < 2:
        return walks[0] if walks else keys.ids
    pipe = store.client.pipeline(transaction=False)
    for walk in walks:
        pipe.zcard(walk)
    sizes = await pipe.execute()
    return min(zip(sizes, walks, strict=True), key=lambda pair: int(pair[0]))[1]


async def _fewer_live(store: Store, walk: str, upper: str) -> bool:
    """Whether the live set is smaller than the ids of `walk` left below `upper` (a lex bound)."""
    pipe = store.client.pipeline(transaction=False)
    pipe.scard(store.keys.live)
    pipe.zlexcount(walk, "-", upper)
    live, left = await pipe.execute()
    return int(live) < int(left)


async def _live_rows(
    store: Store,
    filters: list[str],
    below: str,
    want: int,
    passing: Callable[[list[dict[str, str]]], list[JobRecord | DamagedJob]],
) -> list[JobRecord | DamagedJob]:
    """Up to `want` live jobs below the id `below` that pass the filter, newest first: their ids
    gathered from the whole live set, then fetched newest first until enough pass (`passing`
    reads them and applies the filter again to rows that moved meanwhile)."""
    keys = store.keys
    ids: set[str] = set()  # SSCAN may answer an id twice
    cursor = "0"
    while True:
        args = [keys.live, keys.job(""), cursor, _LIST_CHUNK, below, *filters]
        out = await LIST_LIVE_SCRIPT(store.client, args)
        cursor = str(out[0])
        ids.update(str(i) for i in out[1:])
        if cursor == "0":
            break
    ordered = sorted(ids, reverse=True)
    found: list[JobRecord | DamagedJob] = []
    for lo in range(0, len(ordered), want):
        found.extend(
            passing(await store.hgetall_many([keys.job(i) for i in ordered[lo : lo + want]]))
        )
        if len(found) >= want:
            break
    return found[:want]


async def load_trace(
    store: Store, job_id: str, tenant_id: str | None, page: TraceQuery | None
) -> TracePage:
    job = await get(store, job_id, tenant_id)
    page = page or TraceQuery()
    steps = await ordered_steps(store, job.run_id, job_id)
    before_steps = (
        steps
        if page.steps_cursor is None
        else [
            t for t in steps if (t[0], t[1]) < paging.parse_step_cursor(page.steps_cursor, job_id)
        ]
    )
    step_page = before_steps[-page.steps_limit :]
    key = store.keys.events(job_id)
    top = (
        "+inf"
        if page.events_cursor is None
        else f"({paging.parse_event_cursor(page.events_cursor, job_id)}"
    )
    raw = await store.zrevrangebyscore(key, top, page.events_limit)
    events = [_event(member, job_id) for member in reversed(raw)]
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
        steps_cursor=paging.step_cursor(job_id, *step_page[0][:2]) if more_steps else None,
        events_cursor=paging.event_cursor(job_id, events[0][0]) if more_events else None,
    )


def _event(member: str, job_id: str) -> tuple[int, EventRecord]:
    seq, _, text = member.partition("|")
    try:
        return int(seq), EventRecord.model_validate_json(text)
    except UNDECODABLE as exc:
        raise UndecodableRow(job_id, exc, "event", f"#{seq}") from exc


async def index_names(store: Store, *, fresh: bool) -> None:
    """Jobs stored before `P byname:`, `P bytenant:` and `P byqueue:` existed join them, once
    per database and INDEX_VERSION (a walk of every id, so not at every connect; none on a
    `fresh` one, which holds no jobs)."""
    keys = store.keys
    client = store.client
    if not fresh and await client.get(keys.by_index_built) != INDEX_VERSION:
        lower = "-"
        while ids := cast(
            list[str], await client.zrangebylex(keys.ids, lower, "+", 0, _INDEX_CHUNK)
        ):
            await INDEX_NAMES_SCRIPT(client, [keys.prefix, *ids])
            lower = f"({ids[-1]}"
    await client.set(keys.by_index_built, INDEX_VERSION)
