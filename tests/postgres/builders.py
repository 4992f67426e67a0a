"""Building driver-level enqueue requests for the PostgreSQL tests."""

from __future__ import annotations

from typing import Any

from engine.ids import new_id
from schemas.errors import ErrorPayload
from schemas.jobs import EnqueueRequest, OnConflict


def request(
    now: int,
    *,
    name: str = "work",
    key: str = "k",
    tenant_id: str | None = None,
    queue: str = "default",
    run_at: int | None = None,
    on_conflict: OnConflict = "dedupe",
    input: dict[str, Any] | None = None,
    id: str | None = None,
) -> EnqueueRequest:
    return EnqueueRequest(
        id=id or new_id(),
        run_id=new_id(),
        name=name,
        queue=queue,
        tenant_id=tenant_id,
        idempotency_key=key,
        input=input if input is not None else {"key": key},
        run_at=now if run_at is None else run_at,
        max_attempts=3,
        on_conflict=on_conflict,
    )


def failure(cause: str = "boom") -> ErrorPayload:
    """A job's failure as a nack stores it."""
    return ErrorPayload(
        code="JOB_FAILED", title="the job's body raised", cause=cause, fix="-", retryable=True
    )
