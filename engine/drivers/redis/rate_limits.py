"""Rate limits (engine/rate_limits.py) on Redis: GCRA TATs and reservations under WATCH/MULTI.

Why an optimistic transaction and not Lua: `rate_limits.take_all` (with `use_reservation`,
`adoptable`, `late_window_ms`) is the one home of the arithmetic, and calling it here keeps
Redis exactly in step with memory and SQLite, µs rounding and `up_to` spares included, instead
of a second copy in Lua's doubles. The take WATCHes every key it reads (each rate key's state,
the job's reservation, the adoptable set of its keys), computes with those functions, and
writes in MULTI/EXEC; a take that lost a race (EXEC refused) reads again. Each refusal follows
another take that landed, so the retries are few; past `MOVED_RETRIES` the WatchError comes out
as DRIVER_UNAVAILABLE (transient), like any other failure of the server.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError

from engine.drivers.redis.codec import dumps
from engine.drivers.redis.store import MOVED_RETRIES, Store
from engine.rate_limits import (
    ADOPT_AFTER_MS,
    RateReservation,
    RateState,
    RateTake,
    RateVerdict,
    keys_of,
    late_window_ms,
    take_all,
    use_reservation,
)


def _reservation(text: str) -> RateReservation:
    return RateReservation(*json.loads(text))


async def take_rates(
    store: Store, takes: Sequence[RateTake], now: int, job_id: str | None, up_to: int
) -> RateVerdict:
    keys = store.keys
    rate_keys = keys_of(takes)
    watched = [keys.rate(t.key) for t in takes]
    if job_id is not None:
        watched += [keys.reservation(job_id), keys.adoptable(rate_keys)]
    async with store.client.pipeline(transaction=True) as pipe:
        for attempt in range(MOVED_RETRIES):
            try:
                await pipe.watch(*watched)
                verdict = await _take(store, pipe, takes, rate_keys, now, job_id, up_to)
                await pipe.execute()
                return verdict
            except WatchError:
                # EXEC refused: the pipeline is reset already; WATCH again and read again.
                if attempt == MOVED_RETRIES - 1:
                    raise
    raise AssertionError("unreachable: the last attempt re-raises")


async def _take(
    store: Store,
    pipe: Pipeline,
    takes: Sequence[RateTake],
    rate_keys: str,
    now: int,
    job_id: str | None,
    up_to: int,
) -> RateVerdict:
    """Read (immediate mode, under WATCH), decide, then queue the writes after MULTI."""
    keys = store.keys
    void = cast(list[str], await pipe.zrangebyscore(keys.reservations_by_late, "-inf", now - 1))
    void_rows = await _reservations(pipe, store, void)
    writes: list[tuple[str, Any]] = []
    verdict: RateVerdict | None = None
    if job_id is not None:
        mine = cast(str | None, await pipe.get(keys.reservation(job_id)))
        own = None if mine is None or job_id in void else _reservation(mine)
        held = use_reservation(own, now)
        if held is not None:
            if held.blocked_key is None and own is not None:
                writes.append(("drop", own))
            verdict = held
        else:
            if own is not None:
                writes.append(("drop", own))
            # The earliest slot first; enough rows to pass the void ones (late_at < now, listed
            # above and deleted in this transaction) and the job's own (dropped above).
            due = cast(
                list[str],
                await pipe.zrangebyscore(
                    keys.adoptable(rate_keys),
                    "-inf",
                    now - ADOPT_AFTER_MS,
                    start=0,
                    num=len(void) + 2,
                ),
            )
            found = [
                r
                for r in await _reservations(pipe, store, due)
                if r.job_id not in void and r.job_id != job_id
            ]
            if found:
                writes.append(("drop", found[0]))
                verdict = RateVerdict(None, now)
    new: dict[str, int] = {}
    if verdict is None:
        stored = cast(list[str | None], await pipe.mget([keys.rate(t.key) for t in takes]))
        tats = {t.key: json.loads(v)[1] for t, v in zip(takes, stored, strict=True) if v}
        verdict, new = take_all(tats, takes, now, reserve=job_id is not None, up_to=up_to)
        if job_id is not None and verdict.blocked_key is not None:
            slot = verdict.next_start_at
            made = RateReservation(
                job_id, slot, slot + late_window_ms(takes), verdict.blocked_key, rate_keys
            )
            writes.append(("keep", made))
    pipe.multi()  # type: ignore[no-untyped-call]
    for row in void_rows:
        _drop(pipe, store, row)
    for what, row in writes:
        if what == "drop":
            _drop(pipe, store, row)
        else:
            _keep(pipe, store, row)
    for take in takes:
        if take.key in new:
            state = RateState(take.key, new[take.key], take.limit, take.per_ms, take.burst)
            pipe.set(keys.rate(take.key), dumps(list(state)))
            pipe.zadd(keys.rate_keys, {take.key: 0})
    return verdict


async def _reservations(pipe: Pipeline, store: Store, ids: Sequence[str]) -> list[RateReservation]:
    if not ids:
        return []
    texts = cast(list[str | None], await pipe.mget([store.keys.reservation(i) for i in ids]))
    return [_reservation(t) for t in texts if t is not None]


def _drop(pipe: Pipeline, store: Store, row: RateReservation) -> None:
    keys = store.keys
    pipe.delete(keys.reservation(row.job_id))
    pipe.zrem(keys.reservations_by_slot, row.job_id)
    pipe.zrem(keys.reservations_by_late, row.job_id)
    pipe.zrem(keys.adoptable(row.keys), row.job_id)


def _keep(pipe: Pipeline, store: Store, row: RateReservation) -> None:
    keys = store.keys
    pipe.set(keys.reservation(row.job_id), dumps(list(row)))
    pipe.zadd(keys.reservations_by_slot, {row.job_id: row.slot_at})
    pipe.zadd(keys.reservations_by_late, {row.job_id: row.late_at})
    pipe.zadd(keys.adoptable(row.keys), {row.job_id: row.slot_at})


async def drop_reservation(store: Store, pipe: Pipeline, job_id: str) -> None:
    """Queue the deletion of `job_id`'s reservation, if any (retention, with its job)."""
    text = cast(str | None, await store.client.get(store.keys.reservation(job_id)))
    if text is not None:
        _drop(pipe, store, _reservation(text))


async def rate_states(store: Store, limit: int) -> list[RateState]:
    if limit <= 0:
        return []
    names = cast(list[str], await store.client.zrange(store.keys.rate_keys, 0, limit - 1))
    if not names:
        return []
    texts = cast(list[str | None], await store.client.mget([store.keys.rate(k) for k in names]))
    return [RateState(*json.loads(t)) for t in texts if t is not None]


async def rate_reservations(store: Store, limit: int) -> list[RateReservation]:
    if limit <= 0:
        return []
    ids = cast(list[str], await store.client.zrange(store.keys.reservations_by_slot, 0, limit - 1))
    if not ids:
        return []
    texts = cast(
        list[str | None], await store.client.mget([store.keys.reservation(i) for i in ids])
    )
    return [_reservation(t) for t in texts if t is not None]
