"""Rate limits: N starts per period, per job, queue, tenant, or a key computed from the input.

A limit is GCRA (the generic cell rate algorithm): each key keeps one number, its theoretical
arrival time (TAT). A start is allowed when `TAT - tolerance <= now`, and moves the TAT to
`max(TAT, now) + interval`, where `interval = per / limit` and `tolerance = (burst - 1) *
interval`. So starts are spaced evenly (burst 1), or up to `burst` at once after a quiet spell,
and never more than `limit + burst - 1` in any window of `per`. The TAT lives in the database
(`RateStore.take_rates`), so a limit holds across every worker on every machine.

Times in the store are epoch µs, so a rate like 3 per second keeps its interval exact to the µs
instead of drifting by a third of a millisecond per start. The functions here are the one home of
the arithmetic: the memory and SQLite drivers call them; PostgreSQL's SQL is pinned to them by
tests/postgres/test_rate_limits_agree.py.

A job over its rate is shed like a job over a concurrency cap (rule 7): handed back ready, no
attempt, no `last_error`, with a delay until the moment it may next start.
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
    key; else the key that holds it back the longest and when (epoch ms) it may next start."""

    blocked_key: str | None
    next_start_at: int


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
    tats: Mapping[str, int], takes: Sequence[RateTake], now: int
) -> tuple[RateVerdict, dict[str, int]]:
    """All or nothing: the verdict over `takes` given the stored `tats`, and the TATs to store
    (empty when any key blocks: then nothing is taken anywhere)."""
    now_us = now * 1000
    new: dict[str, int] = {}
    blocked: str | None = None
    latest = now_us
    for take in takes:
        allowed, tat, allow_at = gcra(tats.get(take.key), now_us, take)
        if allowed:
            new[take.key] = tat
        elif allow_at > latest:
            blocked, latest = take.key, allow_at
    if blocked is not None:
        return RateVerdict(blocked, _ceil_ms(latest)), {}
    return RateVerdict(None, now), new


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
