"""A live worker's presence, written as `Worker.run` writes it at its start and on each beat:
what a diagnosis reads as a worker serving every queue (and, on PostgreSQL, what tells the store
that a process follows changes, so its settles NOTIFY)."""

from __future__ import annotations

from engine import Jobs
from schemas.stats import WorkerInfo


async def beat(
    jobs: Jobs,
    worker: str = "elsewhere",
    *,
    concurrency: int = 1,
    caps: dict[str, int] | None = None,
) -> None:
    now = jobs.clock.now_ms()
    info = WorkerInfo(
        id=worker, hostname="test", pid=0, queues=None, concurrency=concurrency,
        started_at=now, last_seen_at=now, caps=caps,
    )  # fmt: skip
    await jobs.driver.worker_seen(info)
