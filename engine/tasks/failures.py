"""A task's stored failure: the one rule for what a failed round makes of the previous one."""

from __future__ import annotations

from schemas.errors import ErrorPayload
from schemas.scheduler import TaskFailure


def next_failure(previous: TaskFailure | None, error: ErrorPayload, now_ms: int) -> TaskFailure:
    """The failure to store after a round that failed with `error` at `now_ms`: the latest
    error, counted as one more round of the failures since the first (whatever their codes:
    the task has not fired since then)."""
    if previous is None:
        return TaskFailure(error=error, since=now_ms, last_failed_at=now_ms, rounds=1)
    return TaskFailure(
        error=error,
        since=previous.since,
        last_failed_at=now_ms,
        rounds=previous.rounds + 1,
    )
