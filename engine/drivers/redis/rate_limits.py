"""Rate limits (engine/rate_limits.py) on Redis: GCRA TATs and reservations, one script a take.

A take is one EVALSHA of rate_script.RATE_TAKE, which reads the job's reservation, the
adoptable ones over its keys and every key's TAT, decides as `rate_limits.take_all` (with
`use_reservation`, `adoptable`, `late_window_ms`) and writes, all in one atomic step: no read in
Python, so no race to retry. tests/redis/test_rate_agreement.py pins the script to the rule.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import cast

from redis.asyncio.client import Pipeline

from engine.drivers.damage import or_none, readable
from engine.drivers.redis.codec import dumps
from engine.drivers.redis.rate_script import RATE_TAKE_SCRIPT
from engine.drivers.redis.scripts import Script
from engine.drivers.redis.store import Store
from engine.rate_limits import (
    RateReservation,
    RateState,
    RateTake,
    RateVerdict,
    keys_of,
    prefix_end,
    stored_reservation,
    stored_state,
)

# Forget idle keys: walk `ratekeys` after a lexical cursor, a chunk a call, and delete each key
# whose TAT (the value's second item) is before ARGV[4] or is no number (another program's
# value), with its name (and a name whose value is gone). ARGV: prefix, cursor ('' from the
# start), chunk, TAT bound. Answers {next cursor ('' at the end), keys deleted}. Atomic with the
# take script, which writes both.
FORGET_IDLE = Script(
    r"""
local p, chunk, before = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local lo = '-'
if ARGV[2] ~= '' then lo = '(' .. ARGV[2] end
local names = redis.call('ZRANGEBYLEX', p .. 'ratekeys', lo, '+', 'LIMIT', 0, chunk)
local gone = 0
for _, name in ipairs(names) do
  local raw = redis.call('GET', p .. 'rate:' .. name)
  local ok, r = false, nil
  if raw then ok, r = pcall(cjson.decode, raw) end
  if not raw then
    redis.call('ZREM', p .. 'ratekeys', name)
  elseif not ok or type(r) ~= 'table' or type(r[2]) ~= 'number' or r[2] < before then
    redis.call('DEL', p .. 'rate:' .. name)
    redis.call('ZREM', p .. 'ratekeys', name)
    gone = gone + 1
  end
end
local last = ''
if #names == chunk then last = names[#names] end
return {last, gone}
"""
)
_FORGET_CHUNK = 1_000


def _reservation(text: str) -> RateReservation:
    return stored_reservation(json.loads(text))


async def take_rates(
    store: Store, takes: Sequence[RateTake], now: int, job_id: str | None, up_to: int
) -> RateVerdict:
    args: list[object] = [
        store.keys.prefix,
        now,
        job_id or "",
        dumps(job_id),
        up_to,
        dumps(keys_of(takes)),
    ]
    for take in takes:
        args += [take.key, dumps(take.key), take.limit, take.per_ms, take.burst]
    blocked, next_start_at, spare = await RATE_TAKE_SCRIPT(store.client, args)
    return RateVerdict(blocked or None, int(next_start_at), int(spare))


async def drop_reservation(store: Store, pipe: Pipeline, job_id: str) -> None:
    """Queue the deletion of `job_id`'s reservation, if any (retention, with its job)."""
    keys = store.keys
    text = cast(str | None, await store.client.get(keys.reservation(job_id)))
    if text is None:
        return
    pipe.delete(keys.reservation(job_id))
    pipe.zrem(keys.reservations_by_slot, job_id)
    pipe.zrem(keys.reservations_by_late, job_id)
    # A reservation another program wrote leaves its adoption entry, whose keys it cannot say.
    found = or_none(lambda: _reservation(text), f"the rate reservation of job {job_id!r}")
    if found is not None:
        pipe.zrem(keys.adoptable(found.keys), job_id)


async def rate_states(store: Store, limit: int, prefix: str) -> list[RateState]:
    if limit <= 0:
        return []
    end = prefix_end(prefix)
    names = cast(
        list[str],
        await store.client.zrangebylex(
            store.keys.rate_keys, f"[{prefix}", "+" if end is None else f"({end}", 0, limit
        ),
    )
    if not names:
        return []
    texts = cast(list[str | None], await store.client.mget([store.keys.rate(k) for k in names]))
    stored = [(k, t) for k, t in zip(names, texts, strict=True) if t is not None]
    return readable(stored, lambda row: stored_state(json.loads(row[1])), _named)


async def rate_reservations(store: Store, limit: int) -> list[RateReservation]:
    if limit <= 0:
        return []
    ids = cast(list[str], await store.client.zrange(store.keys.reservations_by_slot, 0, limit - 1))
    if not ids:
        return []
    texts = cast(
        list[str | None], await store.client.mget([store.keys.reservation(i) for i in ids])
    )
    stored = [(i, t) for i, t in zip(ids, texts, strict=True) if t is not None]
    return readable(stored, lambda row: _reservation(row[1]), _reservation_named)


async def forget_idle_rates(store: Store, tat_before: int, limit: int) -> int:
    cursor, forgot = "", 0
    while forgot < limit:
        chunk = min(_FORGET_CHUNK, limit - forgot)
        args = [store.keys.prefix, cursor, chunk, tat_before]
        cursor, gone = await FORGET_IDLE(store.client, args)
        forgot += int(gone)
        if not cursor:
            break
    return forgot


def _named(row: tuple[str, str]) -> str:
    return f"rate key {row[0]!r}"


def _reservation_named(row: tuple[str, str]) -> str:
    return f"the rate reservation of job {row[0]!r}"
