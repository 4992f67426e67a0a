"""`drain`: run every job that is due now in this process, then stop — a one-shot worker."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from engine.observe import WorkerEvent
from engine.worker import Worker
from mcp_jobs.operations.models import DrainResult, Finding
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.stats import queue_stats
from schemas.errors import NextCall

# How often the settled count is reported while the drain runs.
PROGRESS_EVERY_SECONDS = 0.2
# A job that settled as neither success nor a step along the way, by what its notice says: the
# drain ran it to its end, and that end is a failure its caller must see.
FAILED_ENDS = {
    "dead": ("DEAD_LETTERS", "used every attempt and are dead"),
    "failed": ("JOBS_FAILED", "failed for good (a permanent failure, not retried)"),
}
# The ids a notice lists: the first of them, as diagnose lists a queue's dead jobs.
LISTED_IDS = 20


async def drain(scope: Scope, queues: Sequence[str] | None, concurrency: int) -> DrainResult:
    """Claim and run what is due until nothing is, counting each outcome; progress goes to
    `scope.progress` as settled out of what was due when it began."""
    jobs = scope.jobs
    names = list(queues) if queues is not None else None
    before = await jobs.stats(names)
    total = sum(q.ready + q.expired_leases + q.due_suspended for q in before)
    outcomes: dict[str, int] = {}
    ended_badly: dict[str, list[WorkerEvent]] = {kind: [] for kind in FAILED_ENDS}
    worker = Worker(jobs, concurrency=concurrency, queues=names)
    settled = 0

    def count(event: WorkerEvent) -> None:
        nonlocal settled
        if event.kind == "claimed":
            return
        outcomes[event.kind] = outcomes.get(event.kind, 0) + 1
        settled += 1
        if event.kind in ended_badly:
            ended_badly[event.kind].append(event)

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
        ok=True,
        claimed=claimed,
        outcomes=outcomes,
        queues=await queue_stats(scope, names),
        notices=[_ended_badly(kind, events) for kind, events in ended_badly.items() if events]
        or None,
    )


def _ended_badly(kind: str, events: list[WorkerEvent]) -> Finding:
    """The jobs this drain ran to a failed end (`kind`): how many, how the first failed, and the
    call that shows it."""
    code, ended = FAILED_ENDS[kind]
    first = events[0]
    queues = sorted({event.queue for event in events})
    return Finding(
        code=code,
        severity="warning",
        queue=queues[0] if len(queues) == 1 else None,
        cause=f"{len(events)} job(s) this drain ran {ended}; the first, {first.name}, failed "
        f"with {first.error or 'no error stored'}",
        fix=f"mcp-jobs jobs show {first.job_id} --json",
        next_call=NextCall(tool="inspect_job", arguments={"job_id": first.job_id}),
        job_ids=[event.job_id for event in events[:LISTED_IDS]],
    )
