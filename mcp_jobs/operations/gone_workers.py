"""LEASES_HELD_BY_GONE_WORKER: running jobs whose lease has not run out, held by a worker that no
longer checks in (no presence beat within `LIVE_WORKER_WINDOW_MS`: killed, or cut off from the
database). They show as running, but their worker may be dead, and no other worker takes them
over until each lease runs out: up to a whole lease. Once it has, LEASES_EXPIRED says so.

Every driver stores the lease's holder (`JobRecord.worker_id`) with its end; a running row that
names no holder cannot be judged and is left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.metrics import LIVE_WORKER_WINDOW_MS
from mcp_jobs.operations.models import Finding, QueueStatsView
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.together import each
from mcp_jobs.operations.workers import worker_command
from schemas.jobs import JobRecord
from schemas.stats import WorkerInfo

GONE_HOLDER = "LEASES_HELD_BY_GONE_WORKER"
# Running rows read per queue; a full page counts "at least" what it found.
RUNNING_SCAN = 200
# Job ids and worker ids a finding names at most.
NAMED = 5


async def gone_holder_findings(
    scope: Scope,
    stats: Sequence[QueueStatsView],
    workers: Sequence[WorkerInfo],
    tenant: str | None,
    most: int | None,
) -> list[Finding]:
    """One finding per queue whose unexpired leases are held by workers not among `workers`
    (the live ones). With `most`, only that many queues are read, those with the most such rows
    possible, so the answer's cost stays bounded however many queues run jobs."""
    held = [s for s in stats if s.running > s.expired_leases]
    held.sort(key=lambda s: (s.expired_leases - s.running, s.queue))
    queues = [s.queue for s in held[:most]]
    pages = await each(
        scope.jobs.list(state="running", queue=q, tenant_id=tenant, limit=RUNNING_SCAN)
        for q in queues
    )
    live, now = {w.id for w in workers}, scope.jobs.clock.now_ms()
    findings: list[Finding] = []
    for queue, page in zip(queues, pages, strict=True):
        orphans = [j for j in page.jobs if _held_by_gone(j, live, now)]
        if orphans:
            full = len(page.jobs) >= RUNNING_SCAN
            # A caller pinned to a tenant is not told the workers' names (hosts, pids).
            findings.append(_finding(scope, queue, orphans, now, full, named=tenant is None))
    return findings


def _held_by_gone(job: JobRecord, live: set[str], now: int) -> bool:
    ends = job.lease_expires_at
    return (
        job.worker_id is not None and job.worker_id not in live and ends is not None and ends > now
    )


def _finding(
    scope: Scope, queue: str, orphans: list[JobRecord], now: int, full: bool, named: bool
) -> Finding:
    holders = sorted({j.worker_id for j in orphans if j.worker_id is not None})
    more = f" and {len(holders) - NAMED} more" if len(holders) > NAMED else ""
    who = f"{', '.join(holders[:NAMED])}{more}: " if named else ""
    first = min(j.lease_expires_at or now for j in orphans)
    count = f"at least {len(orphans)}" if full else str(len(orphans))
    return Finding(
        code=GONE_HOLDER,
        severity="warning",
        queue=queue,
        cause=f"{count} running job(s) in queue {queue} are held by {len(holders)} worker(s) "
        f"that have not checked in during the last {LIVE_WORKER_WINDOW_MS // 1000} s ({who}"
        "killed, or cut off from the database), under leases that have not run out: no other "
        f"worker takes them over before then; the first runs out in {(first - now) // 1000} s. "
        "Their completed steps are not re-run",
        fix=worker_command(scope, queue),
        job_ids=[j.id for j in orphans[:NAMED]],
    ).sized(len(orphans))


__all__ = ["GONE_HOLDER", "gone_holder_findings"]
