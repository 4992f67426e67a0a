"""Driver-level enqueue requests numbered by `n`, for the kit's and the drivers' own tests: job
`n` has the id and run id the number gives, the key `k{n}` (or `key`) and the input `{"n": n}`."""

from __future__ import annotations

from schemas.jobs import EnqueueRequest


def numbered(n: int, run_at: int, key: str | None = None) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"{n:032x}",
        run_id=f"{1000 + n:032x}",
        name="work",
        queue="default",
        idempotency_key=key or f"k{n}",
        input={"n": n},
        run_at=run_at,
        max_attempts=3,
    )
