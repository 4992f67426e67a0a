"""Rule 7's stats on Redis without reading a job record. A script folds the live rows per
(queue, state) on the server from the few fields the stats need (rules.live_groups), a chunk
at a time from a copy of the live set the reading takes, so no call holds the server long; the
dead and failed rows are counted by their groups (sorted sets, keys.py), so a reading costs what
is live, not the failures retention keeps. The recent done and cancelled rows are
recent_settled.py's. Rows written before the groups existed (or by an older build) leave the
groups' sum short of the `failing` set: the reading then counts those rows one by one, and
`regroup` (run by migrate) puts them in their groups."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple, cast

from redis.exceptions import OutOfMemoryError

from engine.drivers.redis.codec import dumps, job_state
from engine.drivers.redis.recent_settled import recent_settled
from engine.drivers.redis.scripts import Script
from engine.drivers.redis.settle_scripts import _set as lua_set  # the settles' Lua state set
from engine.drivers.redis.store import Store
from engine.ids import new_id
from engine.rules import SETTLING_STATES, CountedApart, LiveGroup, queue_stats, stats_filter
from schemas.states import SETTLED_STATES, JobState
from schemas.stats import QueueStats

# ARGV: prefix, now, tenant_id as stored (JSON) or '' for any, queue names (JSON list) or '',
# the reading's own key, the chunk size, '1' on the first call. The first call copies the live
# ids to that key (it expires, should the reader go) and counts the dead and failed groups; each
# call then takes a chunk of those ids out and folds the rows still live. Answers {ids in
# `failing`, ids in the groups, ids left to read, live groups, then per live group: queue, state
# (as stored), n, due, oldest queued_at or '', expired, oldest due run_at or '', then per
# counted dead/failed group: queue, state, n}. The predicates are rules.live_groups'.
# With ARGV[8] 'given', the ids to fold are ARGV[9...] instead, and nothing is written: the
# reading of a server at maxmemory, which refuses the copy.
STATS = (
    r"""
local p, now, mine = ARGV[1], tonumber(ARGV[2]), ARGV[5]
local SETTLED = """
    + lua_set(SETTLED_STATES)
    + r"""
local queues = nil
if ARGV[4] ~= '' then
  queues = {}
  for _, q in ipairs(cjson.decode(ARGV[4])) do queues[q] = true end
end
local function wanted(q, tenant)
  return (ARGV[3] == '' or tenant == ARGV[3]) and (queues == nil or queues[q] ~= nil)
end
local out = {0, 0, 0, 0}
local given = ARGV[8] == 'given'
local ids
if given then
  ids = {}
  for i = 9, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  if ARGV[7] == '1' then
    redis.call('SUNIONSTORE', mine, p .. 'live')
    redis.call('PEXPIRE', mine, 60000)
  end
  ids = redis.call('SPOP', mine, tonumber(ARGV[6]))
end
local groups, order = {}, {}
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', p .. 'job:' .. id,
    'q', 'state', 'tenant_id', 'run_at', 'queued_at', 'lease_expires_at')
  local q, state = f[1], f[2]
  if q and state and not SETTLED[state] and wanted(q, f[3]) then
    local by_state = groups[q]
    if not by_state then
      by_state = {}
      groups[q] = by_state
    end
    local g = by_state[state]
    if not g then
      g = {q, state, 0, 0, '', 0, ''}
      by_state[state] = g
      order[#order + 1] = g
    end
    local run_at, queued_at = tonumber(f[4]), tonumber(f[5])
    g[3] = g[3] + 1
    if run_at <= now or (state == '"ready"' and queued_at <= now) then g[4] = g[4] + 1 end
    if run_at <= now and (g[7] == '' or run_at < g[7]) then g[7] = run_at end
    local ready = state == '"ready"' or (state == '"delayed"' and run_at <= now)
    if ready and queued_at <= now and (g[5] == '' or queued_at < g[5]) then g[5] = queued_at end
    if (tonumber(f[6]) or 0) <= now then g[6] = g[6] + 1 end
  end
end
if not given then out[3] = redis.call('SCARD', mine) end
out[4] = #order
for _, g in ipairs(order) do
  for _, v in ipairs(g) do
    if type(v) == 'number' then v = string.format('%d', v) end
    out[#out + 1] = v
  end
end
if ARGV[7] == '1' then
  out[1] = redis.call('SCARD', p .. 'failing')
  for _, group in ipairs(redis.call('SMEMBERS', p .. 'failgroups')) do
    local n = redis.call('ZCARD', p .. 'fail:' .. group)
    out[2] = out[2] + n
    local a = string.find(group, '\0', 1, true)
    local b = string.find(group, '\0', a + 1, true)
    local q = string.sub(group, b + 1)
    if n > 0 and wanted(q, string.sub(group, a + 1, b - 1)) then
      out[#out + 1] = q
      out[#out + 1] = string.sub(group, 1, a - 1)
      out[#out + 1] = n
    end
  end
end
return out
"""
)
STATS_SCRIPT = Script(STATS)
# Live ids a script call folds: a few milliseconds of the server's time at most.
CHUNK = 2_000


def _regroup_lua() -> str:
    return (
        r"""
local p = ARGV[1]
local SETTLING = """
        + lua_set(SETTLING_STATES)
        + r"""
local check = ARGV[2] == 'check'
local total = 0
for _, group in ipairs(redis.call('SMEMBERS', p .. 'failgroups')) do
  local n = redis.call('ZCARD', p .. 'fail:' .. group)
  if n == 0 then
    if check then return 1 end
    redis.call('SREM', p .. 'failgroups', group)
  end
  total = total + n
end
if total == redis.call('SCARD', p .. 'failing') then return 0 end
if check then return 1 end
for _, group in ipairs(redis.call('SMEMBERS', p .. 'failgroups')) do
  redis.call('DEL', p .. 'fail:' .. group)
end
redis.call('DEL', p .. 'failgroups')
local moved = 0
for _, id in ipairs(redis.call('SMEMBERS', p .. 'failing')) do
  local f = redis.call('HMGET', p .. 'job:' .. id, 'q', 'state', 'tenant_id')
  if f[1] and f[2] and f[3] and SETTLING[f[2]] then
    local group = f[2] .. '\0' .. f[3] .. '\0' .. f[1]
    redis.call('ZADD', p .. 'fail:' .. group, 0, id)
    redis.call('SADD', p .. 'failgroups', group)
    moved = moved + 1
  else
    redis.call('SREM', p .. 'failing', id)
  end
end
return moved
"""
    )


# ARGV: prefix. Forgets the groups left empty (retention took their rows). When the groups' sets
# do not hold exactly the `failing` ids, builds them again from the rows (and drops an id that is
# no longer dead or failed); answers the ids grouped then, or 0 when they already agreed. With
# ARGV[2] 'check' it writes nothing and answers 1 when it would.
REGROUP_SCRIPT = Script(_regroup_lua())


async def regroup(store: Store) -> int:
    return int(await REGROUP_SCRIPT(store.client, [store.keys.prefix]))


async def regroup_due(store: Store) -> bool:
    """Whether `regroup` would write anything (read only)."""
    return int(await REGROUP_SCRIPT(store.client, [store.keys.prefix, "check"])) == 1


def _at(text: str) -> int | None:
    return None if text == "" else int(text)


async def stats(
    store: Store, queues: Sequence[str] | None, tenant_id: str | None
) -> list[QueueStats]:
    now = store.clock.now_ms()
    tenant = "" if tenant_id is None else dumps(tenant_id)
    wanted = "" if queues is None else json.dumps(list(queues))
    mine = store.keys.reading(new_id())
    live: dict[tuple[str, JobState], LiveGroup] = {}
    settling: Counter[tuple[str, JobState]] = Counter()
    first = "1"
    given: list[list[str]] | None = None
    while True:
        args = [store.keys.prefix, now, tenant, wanted, mine, CHUNK, first]
        if given is not None:
            args += ["given", *(given.pop() if given else [])]
        try:
            out = await STATS_SCRIPT(store.client, args)
        except OutOfMemoryError:
            if given is not None:
                raise
            # At maxmemory the copy is refused: the ids are read here and handed in, in chunks.
            given = await _live_chunks(store)
            continue
        if given:
            out[2] = len(given)
        end = 4 + 7 * int(out[3])
        for i in range(4, end, 7):
            g = LiveGroup(
                out[i],
                job_state(out[i + 1]),
                int(out[i + 2]),
                int(out[i + 3]),
                _at(out[i + 4]),
                int(out[i + 5]),
                _at(out[i + 6]),
            )
            key = (g.queue, g.state)
            live[key] = _merged(live[key], g) if key in live else g
        if first:
            if int(out[0]) == int(out[1]):
                for i in range(end, len(out), 3):
                    settling[(out[i], job_state(out[i + 1]))] += int(out[i + 2])
            else:
                settling = await _settling_from_rows(store, queues, tenant_id)
            first = ""
        if int(out[2]) == 0:
            break
    recent = await recent_settled(store, now, queues, tenant_id)
    apart = CountedApart(sorted(live.values()), settling)
    return queue_stats([], now, recent, queues=queues, tenant_id=tenant_id, apart=apart)


async def _live_chunks(store: Store) -> list[list[str]]:
    """The live ids in chunks of CHUNK, read without a write (SSCAN may repeat an id: a set)."""
    ids = sorted({i async for i in store.client.sscan_iter(store.keys.live, count=CHUNK)})
    return [ids[n : n + CHUNK] for n in range(0, len(ids), CHUNK)]


def _merged(a: LiveGroup, b: LiveGroup) -> LiveGroup:
    def least(x: int | None, y: int | None) -> int | None:
        return y if x is None else x if y is None else min(x, y)

    return a._replace(
        n=a.n + b.n,
        due=a.due + b.due,
        oldest_queued_at=least(a.oldest_queued_at, b.oldest_queued_at),
        expired=a.expired + b.expired,
        oldest_due_at=least(a.oldest_due_at, b.oldest_due_at),
    )


class _Placed(NamedTuple):
    queue: str
    state: JobState
    tenant_id: str  # as stored (JSON), as the script compares it


async def _settling_from_rows(
    store: Store, queues: Sequence[str] | None, tenant_id: str | None
) -> Counter[tuple[str, JobState]]:
    """The dead and failed rows counted one by one from the fields `regroup` reads (queue,
    state, tenant), not the whole record: a row another program wrote elsewhere is counted."""
    keys = store.keys
    ids = sorted(cast(set[str], await store.client.smembers(keys.failing)))
    pipe = store.client.pipeline(transaction=False)
    for job_id in ids:
        pipe.hmget(keys.job(job_id), "q", "state", "tenant_id")
    counted = stats_filter(queues, None if tenant_id is None else dumps(tenant_id))
    rows = [
        _Placed(queue, job_state(state), tenant)
        for queue, state, tenant in await pipe.execute()
        if queue is not None and state is not None and tenant is not None  # gone since listed
    ]
    return Counter((r.queue, r.state) for r in rows if r.state in SETTLING_STATES and counted(r))
