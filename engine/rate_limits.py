"""Rate limits: N starts per period, per job, queue, tenant, or a key computed from the input.

A limit is GCRA (the generic cell rate algorithm): each key keeps one number, its theoretical
arrival time (TAT). A start is allowed when `TAT - tolerance <= now`, and moves the TAT to
`max(TAT, now) + interval`, where `interval = per / limit` and `tolerance = (burst - 1) *
interval`. So starts are spaced evenly (burst 1), or up to `burst` at once after a quiet spell,
and the takes never number more than `limit + burst - 1` in any window of `per`. A start that runs
`late` after its take bunches with the next ones, `ceil(late / interval)` more in a window: a
reserved start (below) runs at most `late_window_ms` after its slot (one more start for a rate of
50 a second or slower), a start taken ahead (worker_rates' spares) within SPARE_TTL_MS. The TAT
lives in the database (`RateStore.take_rates`), so a limit holds across every worker on every
machine.

Times in the store are epoch µs, so a rate like 3 per second keeps its interval exact to the µs
instead of drifting by a third of a millisecond per start. The functions here are the one home of
the arithmetic: the memory and SQLite drivers call them; PostgreSQL's SQL is pinned to them by
tests/postgres/test_rate_limits_agree.py, Redis's Lua (rate_script.py) by
tests/redis/test_rate_agreement.py.

A job over its rate is shed like a job over a concurrency cap (rule 7): handed back ready, no
attempt, no `last_error`, with a delay until the moment it may next start. That take RESERVES its
start (`take_all(..., reserve=True)`): every key's TAT moves as if the job started at its slot, the
earliest moment all its keys allow, and the store keeps a reservation (job id, slot). Claimed again
at its slot, the job finds the reservation and starts without taking again. So a backlog of B jobs
over one limit is claimed about twice each, each at its own turn, instead of all B coming back at
every next start to be shed again. A reservation is good from its slot to its `late_at`, one
interval plus the burst's tolerance later (`late_window_ms`): a job claimed later than that (it
waited behind other work) takes afresh instead, since starting it would bunch it with the jobs
reserved after it. A slot whose job is that late (workers busy shedding the rest of a backlog,
whose older jobs are claimed first) is not lost: a job over the same keys that takes afresh
ADOPTS it (`adoptable`), starting at once, and the late job reserves again when it comes. A
reservation past its `late_at` is void and the next take deletes it (its job cancelled, deleted
or held back: its slot is simply lost).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from engine.errors import InvalidArgumentError
from schemas.descriptor import RateLimitInfo

logger = logging.getLogger("mcp_jobs.worker")

# Bounds on a declaration: a whole number of starts, a period from a millisecond to a year, and
# an interval of at least a µs (what the store can keep exactly).
MAX_LIMIT = 1_000_000
MAX_PER_MS = 366 * 86_400_000

RateKind = Literal["job", "queue", "tenant"]


def _whole(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgumentError(name, value, f"a whole number from {low} to {high}")
    return value


@dataclass(frozen=True)
class RateLimit:
    """`limit` starts per `per` seconds, `burst` of them at once at most (1: evenly spaced).
    `key` (jobs only) computes a sub-key from the job's input: each value has a limit of its own,
    e.g. `RateLimit(10, per=60, key=lambda input: input.customer_id)`."""

    limit: int
    per: float = 1.0
    burst: int = 1
    key: Callable[[Any], object] | None = None

    def __post_init__(self) -> None:
        _whole("rate_limit.limit", self.limit, 1, MAX_LIMIT)
        per = self.per
        if (
            isinstance(per, bool)
            or not isinstance(per, int | float)
            or not math.isfinite(per)
            or not 1 <= round(per * 1000) <= MAX_PER_MS
        ):
            raise InvalidArgumentError(
                "rate_limit.per", per, f"seconds from 0.001 to {MAX_PER_MS // 1000}"
            )
        _whole("rate_limit.burst", self.burst, 1, self.limit)
        if self.key is not None and not callable(self.key):
            raise InvalidArgumentError("rate_limit.key", self.key, "a function of the input")

    @property
    def per_ms(self) -> int:
        return round(self.per * 1000)

    def info(self) -> RateLimitInfo:
        return RateLimitInfo(
            limit=self.limit, per_ms=self.per_ms, burst=self.burst, keyed=self.key is not None
        )

    def describe(self) -> str:
        text = f"{self.limit} per {self.per:g}s"
        if self.burst > 1:
            text += f", burst {self.burst}"
        return text + (", per key" if self.key is not None else "")


class RateTake(NamedTuple):
    """One start to take under `key`: the rate in force there."""

    key: str
    limit: int
    per_ms: int
    burst: int


class RateVerdict(NamedTuple):
    """What `RateStore.take_rates` answers: None and `now` when the start was taken under every
    key; else the key that holds it back the longest and when (epoch ms) it may next start.
    `spare`: starts taken beyond this one (asked with `up_to`), for the caller to hand out."""

    blocked_key: str | None
    next_start_at: int
    spare: int = 0


class RateState(NamedTuple):
    """One stored key: its TAT (epoch µs) and the rate that last took from it."""

    key: str
    tat: int
    limit: int
    per_ms: int
    burst: int

    def next_start_at(self, now: int) -> int:
        """When (epoch ms) a start may next be taken under this key; `now` if one may now."""
        return max(now, _ceil_ms(self.tat - tolerance_us(self.limit, self.per_ms, self.burst)))


def stored_state(fields: Sequence[object]) -> RateState:
    """A stored key's fields (key, TAT, limit, per_ms, burst) as the rule reads them. A value no
    build writes raises ValueError or TypeError (a store's `damage.readable` passes it over):
    a TAT that is no number would stop every take under its key, a limit of 0 every read."""
    key, tat, limit, per_ms, burst = fields
    state = RateState(
        _text(key),
        stored_tat(tat),
        _stored_whole(limit),
        _stored_whole(per_ms),
        _stored_whole(burst),
    )
    if min(state.limit, state.per_ms, state.burst) < 1:
        raise ValueError(f"no rate: {state!r:.200}")
    return state


def stored_reservation(fields: Sequence[object]) -> RateReservation:
    """A stored reservation's fields as the rule reads them (`keys` may be absent: rows stored
    before it was); a value no build writes raises ValueError or TypeError."""
    job_id, slot_at, late_at, blocked_key, *rest = fields
    if len(rest) > 1:
        raise ValueError(f"no reservation: {list(fields)!r:.200}")
    keys = _text(rest[0]) if rest else ""
    return RateReservation(
        _text(job_id), _stored_whole(slot_at), _stored_whole(late_at), _text(blocked_key), keys
    )


def stored_tat(value: object) -> int:
    """A stored TAT (epoch µs); a value no build writes raises ValueError."""
    return _stored_whole(value)


def _stored_whole(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"not a whole number: {value!r:.100}")


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(f"not text: {value!r:.100}")


def interval_us(limit: int, per_ms: int) -> int:
    return per_ms * 1000 // limit


def tolerance_us(limit: int, per_ms: int, burst: int) -> int:
    return (burst - 1) * interval_us(limit, per_ms)


def _ceil_ms(us: int) -> int:
    return -(-us // 1000)


def gcra(tat: int | None, now_us: int, take: RateTake) -> tuple[bool, int, int]:
    """One key's verdict: (allowed, the TAT to store when every key allows, the epoch µs from
    which a start is allowed). A key never stored starts at `now`."""
    current = now_us if tat is None else max(tat, now_us)
    allow_at = current - tolerance_us(take.limit, take.per_ms, take.burst)
    return allow_at <= now_us, current + interval_us(take.limit, take.per_ms), allow_at


def take_all(
    tats: Mapping[str, int],
    takes: Sequence[RateTake],
    now: int,
    *,
    reserve: bool = False,
    up_to: int = 1,
) -> tuple[RateVerdict, dict[str, int]]:
    """All or nothing: the verdict over `takes` given the stored `tats`, and the TATs to store.
    When a key blocks, nothing is taken (empty TATs) unless `reserve`: then the start is taken at
    the job's slot, the earliest µs every key allows (`slot_us`), and the verdict's
    `next_start_at` is that slot, rounded up to the ms. When every key allows, up to `up_to`
    starts are taken at once — as many as every key admits now (`starts_allowed`) — and the
    verdict's `spare` counts those beyond the first."""
    now_us = now * 1000
    blocked: str | None = None
    slot = now_us
    for take in takes:
        _, _, allow_at = gcra(tats.get(take.key), now_us, take)
        if allow_at > slot:
            blocked, slot = take.key, allow_at
    if blocked is not None and not reserve:
        return RateVerdict(blocked, _ceil_ms(slot)), {}
    count = 1
    if blocked is None and up_to > 1:
        count = min(starts_allowed(tats.get(t.key), now_us, t, up_to) for t in takes)
    # Taken at `slot` (now when every key allows): the starts GCRA admits there, under each key.
    new = {
        take.key: gcra(tats.get(take.key), slot, take)[1]
        + (count - 1) * interval_us(take.limit, take.per_ms)
        for take in takes
    }
    return RateVerdict(blocked, _ceil_ms(slot) if blocked else now, count - 1), new


def starts_allowed(tat: int | None, now_us: int, take: RateTake, up_to: int) -> int:
    """How many starts (1 to `up_to`) one key admits at once now, given it admits one: start j
    (from 0) is admitted while its allow time, the first's plus j intervals, is not after now."""
    current = now_us if tat is None else max(tat, now_us)
    allow_at = current - tolerance_us(take.limit, take.per_ms, take.burst)
    return min(up_to, 1 + (now_us - allow_at) // interval_us(take.limit, take.per_ms))


# A key no start took for a day is forgotten by the pruner (`RateStore.forget_idle_rates`): its
# TAT is long past, so a take finds it exactly as it finds a key never stored, and the stored keys
# stay as many as were used lately, not every customer or tenant a key was ever computed for.
IDLE_KEY_EXPIRY_MS = 86_400_000


def idle_before_us(now: int) -> int:
    """The TAT (epoch µs) below which a stored key is idle: no start under it for a day."""
    return (now - IDLE_KEY_EXPIRY_MS) * 1000


def prefix_end(prefix: str) -> str | None:
    """The least string above every string that starts with `prefix`, in code point order (the
    order of UTF-8 bytes, SQLite's and PostgreSQL's "C" collation and Redis's lexical ranges),
    or None when there is none to give (no prefix)."""
    stripped = prefix.rstrip(chr(0x10FFFF))
    if not stripped:
        return None
    following = ord(stripped[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:  # a surrogate is no text; the next character is
        following = 0xE000
    return stripped[:-1] + chr(following)


def states_with_prefix(states: Mapping[str, RateState], prefix: str, limit: int) -> list[RateState]:
    """Up to `limit` of `states` whose key starts with `prefix`, by key (the drivers that hold
    their keys in memory)."""
    return [states[k] for k in sorted(k for k in states if k.startswith(prefix))[:limit]]


# The least lateness a reservation forgives: the pickup lag of a claim (a wake-up, a claim, a
# take) is a few ms, longer than the interval of a fast rate. Each ms of it may bunch a late
# start with the next ones, so it is kept to a few pickup lags.
LATE_MIN_US = 20_000


def late_window_ms(takes: Sequence[RateTake]) -> int:
    """How long after its slot a reservation still starts its job: the largest over its keys of
    the burst's tolerance plus one interval (at least LATE_MIN_US), so a late start bunches with
    the next ones no more than the burst allows, give or take one."""
    return _ceil_ms(
        max(
            tolerance_us(t.limit, t.per_ms, t.burst)
            + max(interval_us(t.limit, t.per_ms), LATE_MIN_US)
            for t in takes
        )
    )


# A reservation overdue by this much may be adopted: its own job, woken at its slot, is usually
# claimed well within it (a few ms), and what is adopted later than its slot bunches as late.
ADOPT_AFTER_MS = 10


def keys_of(takes: Sequence[RateTake]) -> str:
    """The keys of a take as stored with a reservation: one start over the same keys may stand
    in for another (the TATs were moved under exactly these)."""
    return "\n".join(t.key for t in takes)


def adoptable(reservation: RateReservation, keys: str, now: int) -> bool:
    """Whether a fresh take over `keys` at `now` may start on this overdue reservation's slot."""
    return (
        reservation.keys == keys
        and reservation.slot_at <= now - ADOPT_AFTER_MS
        and now <= reservation.late_at
    )


class RateReservation(NamedTuple):
    """A start taken ahead for a shed job: its slot (epoch ms, the verdict's `next_start_at`, so
    the job due then finds it reached), the last ms it may start the job, and the key that set
    the slot."""

    job_id: str
    slot_at: int
    late_at: int
    blocked_key: str
    keys: str = ""


def use_reservation(reservation: RateReservation | None, now: int) -> RateVerdict | None:
    """The verdict a stored reservation gives a job claimed at `now`: started (no new take) from
    its slot to its `late_at`, held back before; None with none or one void (then the job takes
    afresh). A store deletes the reservation unless the answer holds the job back."""
    if reservation is None or reservation.late_at < now:
        return None
    if reservation.slot_at <= now:
        return RateVerdict(None, now)
    return RateVerdict(reservation.blocked_key, reservation.slot_at)


def take_held(
    rates: dict[str, RateState],
    reservations: dict[str, RateReservation],
    takes: Sequence[RateTake],
    now: int,
    job_id: str | None,
    up_to: int,
) -> RateVerdict:
    """One take over rate state held whole in one place (the memory driver's dicts, the NATS
    driver's one CAS-guarded document), changed in place: void late reservations, use or adopt
    one, else GCRA over every key at once, reserving the slot of a job that must wait."""
    for gone in [j for j, r in reservations.items() if r.late_at < now]:
        del reservations[gone]
    if job_id is not None:
        held = use_reservation(reservations.get(job_id), now)
        if held is not None:
            if held.blocked_key is None:
                del reservations[job_id]
            return held
        reservations.pop(job_id, None)
        wanted = keys_of(takes)
        due = [r for r in reservations.values() if adoptable(r, wanted, now)]
        if due:
            del reservations[min(due, key=lambda r: r.slot_at).job_id]
            return RateVerdict(None, now)
    tats = {t.key: rates[t.key].tat for t in takes if t.key in rates}
    verdict, new = take_all(tats, takes, now, reserve=job_id is not None, up_to=up_to)
    if job_id is not None and verdict.blocked_key is not None:
        slot = verdict.next_start_at
        reservations[job_id] = RateReservation(
            job_id, slot, slot + late_window_ms(takes), verdict.blocked_key, keys_of(takes)
        )
    for take in takes:
        if take.key in new:
            rates[take.key] = RateState(
                take.key, new[take.key], take.limit, take.per_ms, take.burst
            )
    return verdict


def kind_of(key: str) -> RateKind:
    kind = key.partition(":")[0]
    return kind if kind in ("queue", "tenant") else "job"  # type: ignore[return-value]


def _take(key: str, rate: RateLimit) -> RateTake:
    return RateTake(key, rate.limit, rate.per_ms, rate.burst)


def job_take(job: str, rate: RateLimit, input: Callable[[], object]) -> RateTake:
    """The take for a job's own limit: `job:<name>`, or `job:<name>:<computed>` when the limit
    has a key function (`input` parses the job's input for it). A key function that raises, or
    input that does not parse, limits the job under the plain `job:<name>` key, logged: never
    unlimited, and the run that follows reports bad input as it always does."""
    if rate.key is None:
        return _take(f"job:{job}", rate)
    try:
        sub = rate.key(input())
    except Exception:
        logger.warning("rate-limit key of job %s failed; limited as the whole job", job)
        return _take(f"job:{job}", rate)
    return _take(f"job:{job}:{sub}", rate)


def takes_for(
    job: str,
    job_rate: RateLimit | None,
    input: Callable[[], object],
    queue: str,
    queue_rate: RateLimit | None,
    tenant_id: str | None,
    tenant_rate: RateLimit | None,
) -> list[RateTake]:
    """Every take a start of this job needs, keys sorted (so two takers lock rows in one order).
    `input` is called only when a key function needs the parsed input."""
    takes: list[RateTake] = []
    if job_rate is not None:
        takes.append(job_take(job, job_rate, input))
    if queue_rate is not None:
        takes.append(_take(f"queue:{queue}", queue_rate))
    if tenant_id is not None and tenant_rate is not None:
        takes.append(_take(f"tenant:{tenant_id}", tenant_rate))
    takes.sort()
    return takes


def checked_rate(name: str, rate: object, *, keyed: bool) -> RateLimit | None:
    """`rate` as a RateLimit or None; INVALID_ARGUMENT otherwise, or when a key function is set
    where no input is at hand (queue and tenant limits)."""
    if rate is None:
        return None
    if not isinstance(rate, RateLimit):
        raise InvalidArgumentError(name, rate, "a RateLimit(limit, per=seconds) or None")
    if rate.key is not None and not keyed:
        raise InvalidArgumentError(name, rate, "a RateLimit without key= (keys are per job)")
    return rate
