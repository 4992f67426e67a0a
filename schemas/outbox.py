"""Outbox rows: jobs staged inside an application transaction, published by a relay."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from schemas.jobs import EnqueueRequest


class OutboxRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    staged_at: int
    request: EnqueueRequest
    claimed_by: str | None = None
    claim_expires_at: int | None = None
    published_at: int | None = None
    job_id: str | None = None


class OutboxWaiting(BaseModel):
    """Staged rows not yet published (claimed or not): how many, counted up to the bound asked
    (so a count equal to it means at least that many), and when the oldest was staged."""

    model_config = ConfigDict(frozen=True)

    count: int
    oldest_staged_at: int | None = None


@dataclass(frozen=True)
class StagedJob:
    """A job staged in an open transaction. It exists once that transaction commits and a relay
    publishes it, under `job_id` — unless a live job already holds its idempotency key, in
    which case it dedupes into that job, exactly as `enqueue` would."""

    outbox_id: str
    job_id: str
    run_id: str
