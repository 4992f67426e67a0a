"""The event that says an attempt was lost to its lease running out (rule 13).

A claim that takes over a running job (its lease ran out: the worker died, its event loop was
blocked, or the reply of its claim never reached it) writes this event in the same write as the
takeover, so the job's history names each attempt lost this way exactly once, however the
claim's caller or the server fail around it. Every driver writes it; this module says when and
what it holds, and the kit's test_lease_expiry pins the drivers that spell it in SQL or Lua.
"""

from __future__ import annotations

from typing import Any

from schemas.events import EventRecord
from schemas.jobs import JobRecord

LEASE_EXPIRED = "lease_expired"

# The data's keys, in the order the Redis claim script writes them.
LEASE_EXPIRED_FIELDS = ("attempt", "worker_id", "lease_expires_at")


def lease_expired_data(
    attempt: int, worker_id: str | None, lease_expires_at: int | None
) -> dict[str, Any]:
    """The event's data: the attempt lost, the worker that held it, and when its lease ran out."""
    return dict(zip(LEASE_EXPIRED_FIELDS, (attempt, worker_id, lease_expires_at), strict=True))


def lease_expired_event(held: JobRecord, taken_by: str, now: int) -> EventRecord | None:
    """The event a claim by worker `taken_by` at `now` writes for `held`, the row as the claim
    found it: None unless the claim takes over a running row (a claimable running row is one
    whose lease ran out: rules.is_claimable). Its actor is the worker that took the job over."""
    if held.state != "running":
        return None
    data = lease_expired_data(held.attempt, held.worker_id, held.lease_expires_at)
    return lost_lease_event(held.id, held.tenant_id, data, taken_by, now)


def lost_lease_event(
    job_id: str, tenant_id: str | None, data: dict[str, Any], taken_by: str, now: int
) -> EventRecord:
    """The event itself, for a driver that reads the held row's values but not its record."""
    return EventRecord(
        job_id=job_id, at=now, kind=LEASE_EXPIRED, actor=taken_by, tenant_id=tenant_id, data=data
    )


__all__ = [
    "LEASE_EXPIRED",
    "LEASE_EXPIRED_FIELDS",
    "lease_expired_data",
    "lease_expired_event",
    "lost_lease_event",
]
