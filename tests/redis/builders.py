"""Enqueue requests for the Redis driver's own tests."""

from __future__ import annotations

from schemas.jobs import EnqueueRequest


def request(n: int, now: int) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"{n:032x}",
        run_id=f"{1000 + n:032x}",
        name="work",
        queue="default",
        idempotency_key=f"k{n}",
        input={"n": n},
        run_at=now,
        max_attempts=3,
    )
