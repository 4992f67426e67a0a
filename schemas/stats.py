"""Queue statistics: the numbers autoscaling and paging read (rule 7)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class QueueStats(BaseModel):
    model_config = ConfigDict(frozen=True)

    queue: str
    # Ready and due: state `ready`, or `delayed` whose time has come. A shed job is counted here.
    ready: int = 0
    delayed: int = 0
    running: int = 0
    suspended: int = 0
    dead: int = 0
    failed: int = 0
    done: int = 0
    cancelled: int = 0
    # Age of the oldest ready-and-due job, from when it began waiting; 0 when none is.
    oldest_ready_ms: int = 0
    # Running rows whose lease has run out: a worker died holding them. Claimable again.
    expired_leases: int = 0
    # Suspended rows whose wake-up time has passed and that nobody has picked up yet.
    due_suspended: int = 0
    oldest_due_suspended_ms: int = 0


class WorkerInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    hostname: str
    pid: int
    queues: list[str] | None
    concurrency: int
    started_at: int
    last_seen_at: int
