"""The read tools: describe, list, inspect, stats, diagnose, wait, list backfills.

Each operation is a plain async function over a `Scope`, so the CLI runs the very same code and
prints the very same envelope; `register` wraps them as MCP tools.
"""

from __future__ import annotations

import math
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from engine.errors import InvalidArgumentError
from engine.tasks import describe_tasks
from mcp_jobs import health
from mcp_jobs.config import Scope
from mcp_jobs.errors import LimitExceededError, example_call
from mcp_jobs.models import (
    DescribeJobsResult,
    DiagnoseQueueResult,
    InspectJobResult,
    JobSummary,
    LeaseInfo,
    ListJobsResult,
    QueueStatsResult,
    WaitForJobResult,
)
from mcp_jobs.models_backfill import ListBackfillsResult
from mcp_jobs.runtime import AppState, ToolContext, run_tool
from schemas.states import SETTLED_STATES, JobState

READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
WAIT_POLL_MS = 200


# --- operations ---------------------------------------------------------------------------------


async def describe_jobs(scope: Scope, name: str | None = None) -> DescribeJobsResult:
    descriptors = scope.jobs.describe(name)
    tasks = await describe_tasks(scope.jobs) if name is None else None
    return DescribeJobsResult(ok=True, jobs=descriptors, tasks=tasks)


async def list_jobs(
    scope: Scope,
    *,
    state: JobState | list[JobState] | None = None,
    name: str | None = None,
    queue: str | None = None,
    tenant_id: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> ListJobsResult:
    cap = scope.settings.limits.max_page_size
    if isinstance(limit, int) and limit > cap:
        raise LimitExceededError(
            "limit", limit, cap, "rows", f"list_jobs {example_call({'limit': cap})}"
        )
    page = await scope.jobs.list(
        state=state,
        name=name,
        queue=queue,
        tenant_id=scope.tenant(tenant_id),
        limit=limit,
        cursor=cursor,
    )
    return ListJobsResult(
        ok=True, jobs=[JobSummary.of(j) for j in page.jobs], next_cursor=page.next_cursor
    )


async def inspect_job(scope: Scope, job_id: str) -> InspectJobResult:
    trace = await scope.jobs.trace(job_id, tenant_id=scope.tenant(None))
    job = trace.job
    now = scope.jobs.clock.now_ms()
    lease = None
    if job.state == "running" and job.lease_expires_at is not None:
        lease = LeaseInfo(
            worker_id=job.worker_id,
            expires_at=job.lease_expires_at,
            expired=job.lease_expires_at <= now,
        )
    pending = job.state in ("ready", "delayed", "suspended")
    return InspectJobResult(
        ok=True,
        job=job,
        steps=trace.steps,
        events=trace.events,
        lease=lease,
        retry_delays_ms=trace.retry_delays_ms,
        next_attempt_at=job.run_at if pending else None,
        registered=trace.registered,
    )


async def queue_stats(scope: Scope, queues: list[str] | None = None) -> QueueStatsResult:
    return await health.queue_stats(scope, queues)


async def diagnose_queue(scope: Scope, queue: str | None = None) -> DiagnoseQueueResult:
    return await health.diagnose(scope, queue)


async def wait_for_job(
    scope: Scope, job_id: str, timeout_seconds: float | None = None
) -> WaitForJobResult:
    """Poll until the job settles or the (bounded) wait runs out; a timeout is not an error —
    the job is simply still going, and `settled` says so."""
    limits = scope.settings.limits
    timeout = limits.default_wait_seconds if timeout_seconds is None else timeout_seconds
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
        raise InvalidArgumentError("timeout_seconds", timeout, "a number of seconds ≥ 0")
    if timeout > limits.max_wait_seconds or math.isinf(timeout):
        cap = int(limits.max_wait_seconds)
        raise LimitExceededError(
            "timeout_seconds",
            timeout,
            cap,
            "seconds",
            f"wait_for_job {example_call({'job_id': job_id, 'timeout_seconds': cap})}",
        )
    tenant = scope.tenant(None)
    clock = scope.jobs.clock
    started = clock.now_ms()
    total_ms = int(timeout * 1000)
    deadline = started + total_ms
    while True:
        record = await scope.jobs.get(job_id, tenant_id=tenant)
        now = clock.now_ms()
        waited = now - started
        if record.state in SETTLED_STATES or now >= deadline:
            settled = record.state in SETTLED_STATES
            await scope.progress(float(total_ms), float(total_ms), record.state)
            return WaitForJobResult(
                ok=True,
                settled=settled,
                job=JobSummary.of(record),
                output=record.output if settled else None,
                waited_ms=waited,
            )
        await scope.progress(
            float(waited),
            float(total_ms),
            f"{record.state} (attempt {record.attempt} of {record.max_attempts})",
        )
        await clock.sleep_ms(min(WAIT_POLL_MS, deadline - now))


async def list_backfills(scope: Scope, pending_only: bool = False) -> ListBackfillsResult:
    states = await scope.backfills().list(pending_only=pending_only)
    return ListBackfillsResult(ok=True, environment=scope.settings.environment, backfills=states)


# --- registration -------------------------------------------------------------------------------

JobId = Annotated[str, Field(description="the job's id, as enqueue_job or list_jobs returned it")]


def register(server: MCPServer[AppState]) -> None:
    @server.tool(
        name="describe_jobs",
        title="Describe jobs",
        annotations=READ,
        description=(
            "List the jobs this server can enqueue: name, queue, input JSON schema, retry policy "
            "with its delays, timeout, concurrency, and whether a tenant is required. Call this "
            "first, and before enqueue_job when unsure of a job's input. Pass `name` for one job "
            "(JOB_UNKNOWN if no job has that name; its `details.known` lists the names)."
        ),
    )
    async def describe_jobs_tool(
        ctx: ToolContext,
        name: Annotated[str | None, Field(description="one job's name; omit for all")] = None,
    ) -> Annotated[CallToolResult, DescribeJobsResult]:
        return await run_tool(ctx, "describe_jobs", lambda s: describe_jobs(s, name))

    @server.tool(
        name="list_jobs",
        title="List jobs",
        annotations=READ,
        description=(
            "List jobs newest first, filtered by state, name, queue or tenant; cursor-paged "
            "(pass `next_cursor` back as `cursor`). Use it to find failed or dead jobs to inspect "
            "or retry. Errors: INVALID_ARGUMENT (bad state or limit), LIMIT_EXCEEDED (page over "
            "the server's cap), TENANT_PINNED (asked for another tenant on a pinned server)."
        ),
    )
    async def list_jobs_tool(
        ctx: ToolContext,
        state: Annotated[
            JobState | list[JobState] | None, Field(description="one state or a list of states")
        ] = None,
        name: Annotated[str | None, Field(description="only jobs with this name")] = None,
        queue: Annotated[str | None, Field(description="only jobs in this queue")] = None,
        tenant_id: Annotated[str | None, Field(description="only this tenant's jobs")] = None,
        limit: Annotated[int, Field(description="page size, 1 to 200")] = 50,
        cursor: Annotated[str | None, Field(description="next_cursor of the previous page")] = None,
    ) -> Annotated[CallToolResult, ListJobsResult]:
        return await run_tool(
            ctx,
            "list_jobs",
            lambda s: list_jobs(
                s,
                state=state,
                name=name,
                queue=queue,
                tenant_id=tenant_id,
                limit=limit,
                cursor=cursor,
            ),
        )

    @server.tool(
        name="inspect_job",
        title="Inspect a job",
        annotations=READ,
        description=(
            "One job in full: its record (state, attempts, last error, input, output), its steps "
            "with status and timing, its events (retries, parks, operator actions), the lease "
            "while a worker holds it, the retry schedule and when the next attempt is due. Use it "
            "to explain why a job failed or is stuck. JOB_NOT_FOUND when no such job is visible."
        ),
    )
    async def inspect_job_tool(
        ctx: ToolContext, job_id: JobId
    ) -> Annotated[CallToolResult, InspectJobResult]:
        return await run_tool(ctx, "inspect_job", lambda s: inspect_job(s, job_id))

    @server.tool(
        name="queue_stats",
        title="Queue statistics",
        annotations=READ,
        description=(
            "Per queue: ready (due now, including jobs held back by a concurrency cap), delayed, "
            "running, suspended, dead, failed, done, cancelled, the age of the oldest ready job, "
            "expired leases and overdue suspensions. Use it for a quick health read; "
            "diagnose_queue explains what the numbers mean."
        ),
    )
    async def queue_stats_tool(
        ctx: ToolContext,
        queues: Annotated[list[str] | None, Field(description="only these queues")] = None,
    ) -> Annotated[CallToolResult, QueueStatsResult]:
        return await run_tool(ctx, "queue_stats", lambda s: queue_stats(s, queues))

    @server.tool(
        name="diagnose_queue",
        title="Diagnose queues",
        annotations=READ,
        description=(
            "Find what is wrong and say what to do: no live workers, expired leases, an old "
            "ready backlog, dead letters, jobs parked because no worker knows their name, "
            "overdue suspensions, pending backfills. Each finding has a code, the cause with its "
            "numbers, a one-line fix, and often a next_call to make. Start here when jobs are "
            "stalled or failing."
        ),
    )
    async def diagnose_queue_tool(
        ctx: ToolContext,
        queue: Annotated[str | None, Field(description="only this queue")] = None,
    ) -> Annotated[CallToolResult, DiagnoseQueueResult]:
        return await run_tool(ctx, "diagnose_queue", lambda s: diagnose_queue(s, queue))

    @server.tool(
        name="wait_for_job",
        title="Wait for a job",
        annotations=READ,
        description=(
            "Wait until a job settles (done, failed, dead or cancelled) or the timeout passes, "
            "reporting progress while it waits. `settled: false` means it is still going: call "
            "again. timeout_seconds defaults to 20 and is capped at 50 (LIMIT_EXCEEDED above); "
            "JOB_NOT_FOUND when no such job is visible."
        ),
    )
    async def wait_for_job_tool(
        ctx: ToolContext,
        job_id: JobId,
        timeout_seconds: Annotated[
            float | None, Field(description="how long to wait, in seconds (default 20, max 50)")
        ] = None,
    ) -> Annotated[CallToolResult, WaitForJobResult]:
        return await run_tool(
            ctx, "wait_for_job", lambda s: wait_for_job(s, job_id, timeout_seconds)
        )

    @server.tool(
        name="list_backfills",
        title="List backfills",
        annotations=READ,
        description=(
            "The declared backfills (one-off data sweeps) with their ledger state in this "
            "environment: last run, rows processed, whether one is running, whether it is still "
            "pending here. Use `pending_only` to see what still has to run; run_backfill "
            "rehearses or runs one."
        ),
    )
    async def list_backfills_tool(
        ctx: ToolContext,
        pending_only: Annotated[
            bool, Field(description="only backfills not yet completed in this environment")
        ] = False,
    ) -> Annotated[CallToolResult, ListBackfillsResult]:
        return await run_tool(ctx, "list_backfills", lambda s: list_backfills(s, pending_only))
