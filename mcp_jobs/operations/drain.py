"""`drain`: run every job that is due now in this process, then stop — a one-shot worker."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from engine.observe import WorkerEvent
from engine.worker import Worker
from mcp_jobs.operations.models import DrainResult
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.stats import queue_stats

# How often the settled count is reported while the drain runs.
PROGRESS_EVERY_SECONDS = 0.2


async def drain(scope: Scope, queues: Sequence[str] | None, concurrency: int) -> DrainResult:
    """Claim and run what is due until nothing is, counting each outcome; progress goes to
    `scope.progress` as settled out of what was due when it began."""
    jobs = scope.jobs
    names = list(queues) if queues is not None else None
    before = await jobs.stats(names)
    total = sum(q.ready + q.expired_leases + q.due_suspended for q in before)
    outcomes: dict[str, int] = {}
    worker = Worker(jobs, concurrency=concurrency, queues=names)
    settled = 0

    def count(event: WorkerEvent) -> None:
        nonlocal settled
        if event.kind == "claimed":
            return
        outcomes[event.kind] = outcomes.get(event.kind, 0) + 1
        settled += 1

    worker.add_listener(count)
    # As a worker does when it starts: a process without the app then describes these jobs, and
    # its fix lines import the app that ran them.
    await worker.publish_descriptors()
    async with anyio.create_task_group() as tg:

        async def report() -> None:
            while True:
                await scope.progress(settled, max(total, settled), f"{settled} settled")
                await anyio.sleep(PROGRESS_EVERY_SECONDS)

        tg.start_soon(report)
        claimed = await worker.run_until_idle()
        tg.cancel_scope.cancel()
    await scope.progress(settled, max(total, settled), "done")
    return DrainResult(
        ok=True, claimed=claimed, outcomes=outcomes, queues=await queue_stats(scope, names)
    )
