"""Settled counts on Redis (engine/settled_counts.py): the `settled` zset scored by
`finished_at`, walked over [since, until) in chunks by one script that reads each id's queue,
state and tenant and answers only the counts. Chunked, so a long interval never holds the server
for more than one chunk; the cursor is (score, members of that score already seen), since a
batch of acks shares one `finished_at`."""

from __future__ import annotations

import json
from collections import Counter

from engine.drivers.redis.codec import dumps
from engine.drivers.redis.scripts import Script
from engine.drivers.redis.store import Store
from engine.settled_counts import from_rows
from schemas.stats import SettledCount

CHUNK = 5_000

# ARGV: settled zset, job key prefix, start score, members of it to skip, until (exclusive),
# chunk size, tenant_id as stored (JSON) or '' for any. Answers {ids read, last score, members
# of it read in all, queue, state, n, ...}; state as stored (JSON).
COUNT = r"""
local rows = redis.call('ZRANGEBYSCORE', ARGV[1], ARGV[3], '(' .. ARGV[5], 'WITHSCORES',
                        'LIMIT', ARGV[4], ARGV[6])
local counts, order = {}, {}
local last, same = tonumber(ARGV[3]), tonumber(ARGV[4])
for i = 1, #rows, 2 do
  local score = tonumber(rows[i + 1])
  if score == last then same = same + 1 else last, same = score, 1 end
  local f = redis.call('HMGET', ARGV[2] .. rows[i], 'q', 'state', 'tenant_id')
  if f[1] and f[2] and (ARGV[7] == '' or f[3] == ARGV[7]) then
    local key = f[1] .. '\0' .. f[2]
    if not counts[key] then counts[key] = 0; order[#order + 1] = key end
    counts[key] = counts[key] + 1
  end
end
local out = {#rows / 2, string.format('%d', last), same}
for _, key in ipairs(order) do
  local cut = string.find(key, '\0', 1, true)
  out[#out + 1] = string.sub(key, 1, cut - 1)
  out[#out + 1] = string.sub(key, cut + 1)
  out[#out + 1] = counts[key]
end
return out
"""
COUNT_SCRIPT = Script(COUNT)


async def settled_counts(
    store: Store, since_ms: int, until_ms: int, tenant_id: str | None
) -> dict[str, SettledCount]:
    keys = store.keys
    tenant = "" if tenant_id is None else dumps(tenant_id)
    counts: Counter[tuple[str, str]] = Counter()
    score, skip = since_ms, 0
    while since_ms < until_ms:
        args = [keys.settled, keys.job(""), score, skip, until_ms, CHUNK, tenant]
        out = await COUNT_SCRIPT(store.client, args)
        read, score, skip = int(out[0]), int(out[1]), int(out[2])
        for i in range(3, len(out), 3):
            counts[(str(out[i]), json.loads(out[i + 1]))] += int(out[i + 2])
        if read < CHUNK:
            break
    return from_rows((q, state, n) for (q, state), n in counts.items())
