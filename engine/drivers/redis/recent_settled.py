"""The stats' recent done and cancelled rows on Redis (engine.rules.recent_settled_start): the
`settled` zset walked newest first by one script, in chunks, that reads each id's queue, state
and tenant. It finds the window over every queue and tenant, as the rule does (each recent
state's rows counted, and the finish time of its cap-th newest kept), and answers only the rows
the filters count, run-length folded by (queue, state, finish time). It stops at the first row
of a state past the cap that is older than its cap-th newest, since nothing older counts then;
the cursor is (score, members of it already read), as in settled_counts.py."""

from __future__ import annotations

import json
from collections.abc import Sequence

from engine import rules
from engine.drivers.redis.codec import dumps
from engine.drivers.redis.scripts import Script
from engine.drivers.redis.store import Store
from engine.rules import Settled

CHUNK = 2_000

# ARGV: settled zset, job key prefix, start score (or +inf), members of it to skip, lowest score,
# chunk size, tenant_id as stored (JSON) or '' for any, queue names (JSON list) or '' for any,
# the cap, then per recent state: the state as stored (JSON), its rows read so far, and the
# finish time of its cap-th newest or ''. Answers {ids read, last score, members of it read in
# all, 1 when it stopped past the cap else 0, per recent state its rows and cap-th time (or ''),
# then queue, state, finish score, n, ...}; state as stored (JSON).
RECENT = r"""
local rows = redis.call('ZREVRANGEBYSCORE', ARGV[1], ARGV[3], ARGV[5], 'WITHSCORES',
                        'LIMIT', ARGV[4], ARGV[6])
local queues = nil
if ARGV[8] ~= '' then
  queues = {}
  for _, q in ipairs(cjson.decode(ARGV[8])) do queues[q] = true end
end
local cap = tonumber(ARGV[9])
local order, seen, edge = {}, {}, {}
for i = 10, #ARGV, 3 do
  local s = ARGV[i]
  order[#order + 1] = s
  seen[s] = tonumber(ARGV[i + 1])
  if ARGV[i + 2] ~= '' then edge[s] = tonumber(ARGV[i + 2]) end
end
local read, stopped = 0, 0
local last, same = ARGV[3], tonumber(ARGV[4])
local key = nil
local found = {}
for i = 1, #rows, 2 do
  local score = rows[i + 1]
  local f = redis.call('HMGET', ARGV[2] .. rows[i], 'q', 'state', 'tenant_id')
  local state = f[2]
  if state and seen[state] then
    local at = tonumber(score)
    local n = seen[state] + 1
    seen[state] = n
    if n == cap then edge[state] = at end
    if n > cap and at < edge[state] then
      stopped = 1
      break
    end
    if f[1] and (ARGV[7] == '' or f[3] == ARGV[7]) and (queues == nil or queues[f[1]]) then
      local this = f[1] .. '\0' .. state .. '\0' .. score
      if this == key then
        found[#found] = found[#found] + 1
      else
        key = this
        found[#found + 1] = f[1]
        found[#found + 1] = state
        found[#found + 1] = score
        found[#found + 1] = 1
      end
    end
  end
  read = read + 1
  if score == last then same = same + 1 else last, same = score, 1 end
end
local out = {read, last, same, stopped}
for _, s in ipairs(order) do
  out[#out + 1] = seen[s]
  out[#out + 1] = edge[s] and string.format('%d', edge[s]) or ''
end
for _, v in ipairs(found) do out[#out + 1] = v end
return out
"""
RECENT_SCRIPT = Script(RECENT)


async def recent_settled(
    store: Store, now: int, queues: Sequence[str] | None, tenant_id: str | None
) -> tuple[int, list[Settled]]:
    """The stats' recent window start, and the done and cancelled rows of the filters finished
    since the hour's start down to where the walk stopped, newest first."""
    keys = store.keys
    tenant = "" if tenant_id is None else dumps(tenant_id)
    wanted = "" if queues is None else json.dumps(list(queues))
    states = [dumps(s) for s in rules.RECENT_SETTLED_STATES]
    cap = rules.RECENT_SETTLED_CAP
    seen = [0] * len(states)
    edges: list[int | None] = [None] * len(states)
    found: list[Settled] = []
    score, skip = "+inf", 0
    while True:
        carried = [
            v
            for state, n, edge in zip(states, seen, edges, strict=True)
            for v in (state, n, "" if edge is None else edge)
        ]
        hour = now - rules.RECENT_SETTLED_MS
        args = [keys.settled, keys.job(""), score, skip, hour, CHUNK, tenant, wanted, cap, *carried]
        out = await RECENT_SCRIPT(store.client, args)
        read, score, skip, stopped = int(out[0]), str(out[1]), int(out[2]), int(out[3])
        head = 4 + 2 * len(states)
        seen = [int(n) for n in out[4:head:2]]
        edges = [None if e == "" else int(e) for e in out[5:head:2]]
        for i in range(head, len(out), 4):
            found.append(
                Settled(str(out[i]), json.loads(out[i + 1]), int(out[i + 2]), int(out[i + 3]))
            )
        if stopped or read < CHUNK:
            # A state's edge caps the window once it has more rows than the cap.
            capped = (e if n > cap else None for n, e in zip(seen, edges, strict=True))
            return rules.recent_settled_since(capped, now), found
