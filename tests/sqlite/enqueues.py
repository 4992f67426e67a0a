"""The enqueue request the SQLite tests insert through the driver directly."""

from __future__ import annotations

from schemas.jobs import EnqueueRequest, OnConflict

START = 1_767_225_600_000  # the ManualClock's default start, 2026-01-01T00:00:00Z


def request(
    n: int, *, key: str | None = None, on_conflict: OnConflict = "dedupe"
) -> EnqueueRequest:
    """Job `n`: ids and the default key from `n`, due at START."""
    return EnqueueRequest(
        id=f"job{n:05d}",
        run_id=f"run{n:05d}",
        name="item",
        queue="default",
        idempotency_key=key or f"k{n}",
        input={"n": n},
        run_at=START,
        max_attempts=3,
        on_conflict=on_conflict,
    )
