"""The stats' recent done and cancelled rows on Redis (engine.rules.recent_settled_counts): the
`settled` zset walked newest first by one script, in chunks, that reads each id's queue, state
and tenant and answers only the rows the stats count, run-length folded by (queue, state, finish
time). The walk stops once a state has more than the cap and has passed its cap-th newest, since
nothing older counts then; the cursor is (score, members of it already read), as in
settled_counts.py."""

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
# then the recent states as stored (JSON). Answers {ids read, last score, members of it read in
# all, queue, state, finish score, n, ...}; state as stored (JSON).
RECENT = r"""
local rows = redis.call('ZREVRANGEBYSCORE', ARGV[1], ARGV[3], ARGV[5], 'WITHSCORES',
                        'LIMIT', ARGV[4], ARGV[6])
local queues = nil
if ARGV[8] ~= '' then
  queues = {}
  for _, q in ipairs(cjson.decode(ARGV[8])) do queues[q] = true end
end
local recent = {}
for i = 9, #ARGV do recent[ARGV[i]] = true end
local out = {#rows / 2, ARGV[3], tonumber(ARGV[4])}
local last, same = ARGV[3], tonumber(ARGV[4])
local key = nil
for i = 1, #rows, 2 do
  local score = rows[i + 1]
  if score == last then same = same + 1 else last, same = score, 1 end
  local f = redis.call('HMGET', ARGV[2] .. rows[i], 'q', 'state', 'tenant_id')
  if f[1] and f[2] and recent[f[2]] and (ARGV[7] == '' or f[3] == ARGV[7])
     and (queues == nil or queues[f[1]]) then
    local this = f[1] .. '\0' .. f[2] .. '\0' .. score
    if this == key then
      out[#out] = out[#out] + 1
    else
      key = this
      out[#out + 1] = f[1]
      out[#out + 1] = f[2]
      out[#out + 1] = score
      out[#out + 1] = 1
    end
  end
end
out[2], out[3] = last, same
return out
"""
RECENT_SCRIPT = Script(RECENT)


def _past_the_cap(rows: Sequence[Settled], below: int) -> bool:
    """Whether some state has more than the cap among `rows` (newest first) and every row that
    shares its cap-th newest finish time has been read (the walk is now `below` it)."""
    cap = rules.RECENT_SETTLED_CAP
    for state in rules.RECENT_SETTLED_STATES:
        seen = 0
        edge: int | None = None
        for r in rows:
            if r.state == state:
                seen += r.n
                if edge is None and seen >= cap:
                    edge = r.finished_at
        if seen > cap and edge is not None and below < edge:
            return True
    return False


async def recent_settled(
    store: Store, hour: int, queues: Sequence[str] | None, tenant_id: str | None
) -> list[Settled]:
    """The done and cancelled rows the stats count, finished since `hour`, newest first."""
    keys = store.keys
    tenant = "" if tenant_id is None else dumps(tenant_id)
    wanted = "" if queues is None else json.dumps(list(queues))
    states = [dumps(s) for s in rules.RECENT_SETTLED_STATES]
    found: list[Settled] = []
    score, skip = "+inf", 0
    while True:
        args = [keys.settled, keys.job(""), score, skip, hour, CHUNK, tenant, wanted, *states]
        out = await RECENT_SCRIPT(store.client, args)
        read, score, skip = int(out[0]), str(out[1]), int(out[2])
        for i in range(3, len(out), 4):
            found.append(
                Settled(str(out[i]), json.loads(out[i + 1]), int(out[i + 2]), int(out[i + 3]))
            )
        if read < CHUNK or (score != "+inf" and _past_the_cap(found, int(float(score)))):
            return found
