"""Settled counts: how many jobs each queue settled within a half-open interval of
`finished_at` (`since_ms <= finished_at < until_ms`), per settled state. Adjacent intervals
never count a job twice, so a sampler that reads [previous reading, this reading) each time
sums to the exact total. The SQL and Redis drivers encode `in_interval`; the kit pins them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from engine.errors import InvalidArgumentError
from schemas.jobs import JobRecord
from schemas.states import SETTLED_STATES
from schemas.stats import SettledCount

# Epoch ms fits a signed 64-bit column; beyond it a SQL driver would refuse the parameter.
MAX_MS = 2**63 - 1


def checked_interval(since_ms: object, until_ms: object) -> tuple[int, int]:
    """(since_ms, until_ms) as whole epoch ms with since <= until (an empty interval is fine)."""
    if isinstance(since_ms, bool) or not isinstance(since_ms, int) or not 0 <= since_ms <= MAX_MS:
        raise InvalidArgumentError("since_ms", since_ms, f"whole epoch ms in [0, {MAX_MS}]")
    if isinstance(until_ms, bool) or not isinstance(until_ms, int) or not 0 <= until_ms <= MAX_MS:
        raise InvalidArgumentError("until_ms", until_ms, f"whole epoch ms in [0, {MAX_MS}]")
    if until_ms < since_ms:
        raise InvalidArgumentError("until_ms", until_ms, f"at least since_ms ({since_ms})")
    return since_ms, until_ms


def in_interval(job: JobRecord, since_ms: int, until_ms: int, tenant_id: str | None) -> bool:
    """Whether `job` counts: settled, finished within [since_ms, until_ms), of the tenant."""
    return (
        job.state in SETTLED_STATES
        and job.finished_at is not None
        and since_ms <= job.finished_at < until_ms
        and (tenant_id is None or job.tenant_id == tenant_id)
    )


def tally(
    jobs: Iterable[JobRecord], since_ms: int, until_ms: int, tenant_id: str | None
) -> dict[str, SettledCount]:
    """The counts over records in hand (the memory driver's answer)."""
    found = (j for j in jobs if in_interval(j, since_ms, until_ms, tenant_id))
    return from_rows((j.queue, j.state, 1) for j in found)


def from_rows(rows: Iterable[tuple[str, str, int]]) -> dict[str, SettledCount]:
    """Per queue, from (queue, state, count) rows as a driver's query groups them; a queue
    with nothing settled in the interval is absent."""
    counts: dict[str, Counter[str]] = {}
    for queue, state, n in rows:
        if state in SETTLED_STATES and n:
            counts.setdefault(queue, Counter())[state] += int(n)
    return {q: SettledCount(**c) for q, c in sorted(counts.items())}
