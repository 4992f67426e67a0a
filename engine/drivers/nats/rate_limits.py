"""Rate limits (engine.rate_limits): every key's TAT and every reservation in ONE document,
`rates`, changed by compare-and-set. A take over several keys must be all or nothing, and NATS
KV writes one key atomically, so the state they share is one key: each take runs the same steps
as the memory driver over that document and writes it back against the revision it read.
Correct across processes; the price is one hot key that every rate-limited claim writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.drivers.damage import or_none, readable
from engine.drivers.nats.codec import dumps, loads_object
from engine.drivers.nats.store import Store, Unchanged
from engine.rate_limits import (
    RateReservation,
    RateState,
    RateTake,
    RateVerdict,
    states_with_prefix,
    stored_reservation,
    stored_state,
    take_held,
)

KEY = "rates"
# Keys the document holds before a take drops the idle ones (`_take`).
KEYS_KEPT = 256


class _State:
    """The document as the rule reads it. What another program wrote reads as none, logged
    once: a key's TAT is taken afresh, a reservation dropped, a document that is no object
    empty, and the next take writes the document anew."""

    def __init__(self, raw: bytes | None) -> None:
        data = None if raw is None else or_none(lambda: _document(raw), f"the {KEY!r} document")
        rates, reservations = data or ({}, {})
        self.rates = dict(readable(rates.items(), _rate, lambda kv: f"rate key {kv[0]!r}"))
        self.reservations = dict(
            readable(
                reservations.items(),
                _reservation,
                lambda kv: f"the rate reservation of job {kv[0]!r}",
            )
        )

    def raw(self) -> bytes:
        return dumps(
            {
                "rates": {k: list(v) for k, v in self.rates.items()},
                "reservations": {j: list(v) for j, v in self.reservations.items()},
            }
        )


def _document(raw: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    data = loads_object(raw)
    rates, reservations = data["rates"], data["reservations"]
    if not isinstance(rates, dict) or not isinstance(reservations, dict):
        raise TypeError("rates and reservations are no objects")
    return rates, reservations


def _rate(kv: tuple[str, Any]) -> tuple[str, RateState]:
    return kv[0], stored_state(kv[1])


def _reservation(kv: tuple[str, Any]) -> tuple[str, RateReservation]:
    return kv[0], stored_reservation(kv[1])


def _take(
    state: _State, takes: Sequence[RateTake], now: int, job_id: str | None, up_to: int
) -> RateVerdict:
    """The take over the stored document, as the memory driver takes over its dicts. Past
    `KEYS_KEPT` keys it also drops those whose TAT has passed: GCRA reads such a key as none
    (it counts from now), and every take decodes and rewrites the whole document, so a key per
    customer or tenant ever served made each take slower than the last."""
    verdict = take_held(state.rates, state.reservations, takes, now, job_id, up_to)
    if len(state.rates) > KEYS_KEPT:
        passed = now * 1000  # TATs are epoch µs
        for key in [k for k, s in state.rates.items() if s.tat <= passed]:
            del state.rates[key]
    return verdict


async def take_rates(
    store: Store, takes: Sequence[RateTake], now: int, job_id: str | None, up_to: int
) -> RateVerdict:
    verdict = RateVerdict(None, now)

    def take(raw: bytes | None) -> bytes:
        nonlocal verdict
        state = _State(raw)
        verdict = _take(state, takes, now, job_id, up_to)
        new = state.raw()
        if raw is not None and new == raw:
            raise Unchanged
        return new

    # Fresh first: a take is decided on the server's document, not a lagging copy.
    await store.fresh(KEY)
    await store.change_key(KEY, take)
    return verdict


async def rate_states(store: Store, limit: int, prefix: str) -> list[RateState]:
    state = _State(entry.raw if (entry := await store.fresh(KEY)) else None)
    return states_with_prefix(state.rates, prefix, limit)


async def forget_idle_rates(store: Store, tat_before: int, limit: int) -> int:
    """Drop idle keys from the one document every take rewrites, so it holds the keys used
    lately, not every key ever computed."""
    entry = store.replica.get(KEY)
    if entry is None or not any(s.tat < tat_before for s in _State(entry.raw).rates.values()):
        return 0
    forgot = 0

    def drop(raw: bytes | None) -> bytes:
        nonlocal forgot
        state = _State(raw)
        idle = [k for k, s in state.rates.items() if s.tat < tat_before][:limit]
        if not idle:
            raise Unchanged
        for key in idle:
            del state.rates[key]
        forgot = len(idle)
        return state.raw()

    await store.change_key(KEY, drop)
    return forgot


async def rate_reservations(store: Store, limit: int) -> list[RateReservation]:
    state = _State(entry.raw if (entry := await store.fresh(KEY)) else None)
    found = sorted(state.reservations.values(), key=lambda r: (r.slot_at, r.job_id))
    return found[:limit]


async def forget_reservation(store: Store, job_id: str) -> None:
    """Drop a pruned job's reservation (retention), if it still has one."""
    entry = store.replica.get(KEY)
    if entry is None or job_id not in _State(entry.raw).reservations:
        return

    def drop(raw: bytes | None) -> bytes:
        state = _State(raw)
        if state.reservations.pop(job_id, None) is None:
            raise Unchanged
        return state.raw()

    await store.change_key(KEY, drop)
