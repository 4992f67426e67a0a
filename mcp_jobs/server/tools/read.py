"""The read tools, registered over the operations: describe, list, inspect, stats, diagnose,
wait, list backfills."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from engine.backfill.ledger import MAX_RUNS_CURSOR_BYTES, MAX_RUNS_PAGE
from engine.paging import DEFAULT_TRACE_PAGE, MAX_TRACE_PAGE
from mcp_jobs import operations
from mcp_jobs.operations.models import (
    DescribeJobsResult,
    DiagnoseQueueResult,
    InspectJobResult,
    ListBackfillsResult,
    ListJobsResult,
    QueueStatsResult,
    WaitForJobResult,
)
from mcp_jobs.server.calls import ToolContext, run_tool
from mcp_jobs.server.state import AppState
from schemas.states import JobState

READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

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
        return await run_tool(ctx, "describe_jobs", lambda s: operations.describe_jobs(s, name))

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
            lambda s: operations.list_jobs(
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
            "to explain why a job failed or is stuck. Steps and events are paged: the newest "
            "(50 by default) with their totals; pass `steps_cursor` / `events_cursor` back for "
            "older ones. JOB_NOT_FOUND when no such job is visible."
        ),
    )
    async def inspect_job_tool(
        ctx: ToolContext,
        job_id: JobId,
        steps_limit: Annotated[
            int,
            Field(description="steps in this page, 1 to 500", ge=1, le=MAX_TRACE_PAGE, strict=True),
        ] = DEFAULT_TRACE_PAGE,
        steps_cursor: Annotated[
            str | None,
            Field(description="steps_cursor of the previous answer", max_length=64),
        ] = None,
        events_limit: Annotated[
            int,
            Field(
                description="events in this page, 1 to 500", ge=1, le=MAX_TRACE_PAGE, strict=True
            ),
        ] = DEFAULT_TRACE_PAGE,
        events_cursor: Annotated[
            str | None,
            Field(description="events_cursor of the previous answer", max_length=64),
        ] = None,
    ) -> Annotated[CallToolResult, InspectJobResult]:
        return await run_tool(
            ctx,
            "inspect_job",
            lambda s: operations.inspect_job(
                s,
                job_id,
                steps_limit=steps_limit,
                steps_cursor=steps_cursor,
                events_limit=events_limit,
                events_cursor=events_cursor,
            ),
        )

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
        return await run_tool(ctx, "queue_stats", lambda s: operations.queue_stats(s, queues))

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
        return await run_tool(ctx, "diagnose_queue", lambda s: operations.diagnose_queue(s, queue))

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
            ctx, "wait_for_job", lambda s: operations.wait_for_job(s, job_id, timeout_seconds)
        )

    @server.tool(
        name="list_backfills",
        title="List backfills",
        annotations=READ,
        description=(
            "The declared backfills (one-off data sweeps) with their ledger state in this "
            "environment: last run, rows processed, whether one is running, whether it is still "
            "pending here. Use `pending_only` to see what still has to run; run_backfill "
            "rehearses or runs one. Pass `name` for one backfill and a page of its ledger "
            "(every run here, newest first, `runs_limit` 1 to 200, default 20); pass "
            "`runs_cursor` back for older runs. Errors: BACKFILL_UNKNOWN (no such name), "
            "INVALID_ARGUMENT (a runs_cursor that is not one, or paging without `name`)."
        ),
    )
    async def list_backfills_tool(
        ctx: ToolContext,
        pending_only: Annotated[
            bool, Field(description="only backfills not yet completed in this environment")
        ] = False,
        name: Annotated[
            str | None,
            Field(description="one backfill: its state and a page of its ledger rows"),
        ] = None,
        runs_limit: Annotated[
            int | None,
            Field(
                description="with `name`: runs in this page, 1 to 200 (default 20)",
                ge=1,
                le=MAX_RUNS_PAGE,
                strict=True,
            ),
        ] = None,
        runs_cursor: Annotated[
            str | None,
            Field(
                description="with `name`: runs_cursor of the previous answer",
                max_length=MAX_RUNS_CURSOR_BYTES,
            ),
        ] = None,
    ) -> Annotated[CallToolResult, ListBackfillsResult]:
        return await run_tool(
            ctx,
            "list_backfills",
            lambda s: operations.list_backfills(
                s, pending_only, name=name, runs_limit=runs_limit, runs_cursor=runs_cursor
            ),
        )
