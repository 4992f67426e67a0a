"""The read tools, registered over the operations: describe, list, inspect, stats, diagnose,
the database report, wait, list backfills."""

# No `from __future__ import annotations`: the SDK reads each tool's signature at
# registration, and the bounds in it are this server's limits, local to `register`.

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from engine.backfill.ledger import MAX_RUNS_PAGE
from engine.bounds import MAX_ID_BYTES
from engine.paging import DEFAULT_TRACE_PAGE, MAX_TRACE_PAGE
from mcp_jobs import operations
from mcp_jobs.config import SHOWN, ServerLimits
from mcp_jobs.operations.cursors import MAX_ANY_CURSOR_BYTES
from mcp_jobs.operations.models import (
    DbReportResult,
    DescribeJobsResult,
    DiagnoseQueueResult,
    InspectJobResult,
    ListBackfillsResult,
    ListJobsResult,
    QueueStatsResult,
    WaitForJobResult,
)
from mcp_jobs.server.apps_ui import UI_META
from mcp_jobs.server.arguments import ServerCap
from mcp_jobs.server.calls import ToolContext, run_tool
from mcp_jobs.server.engine_refusal import mended
from mcp_jobs.server.state import AppState
from schemas.states import JobState

READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

JobId = Annotated[str, Field(description="from enqueue_job or list_jobs")]


def register(server: MCPServer[AppState], limits: ServerLimits) -> None:
    """The read tools, their numeric arguments bounded by `limits` where the server caps them
    (published as the schema's `maximum`)."""
    page_cap = limits.max_page_size
    wait_cap = limits.max_wait_seconds

    @server.tool(
        name="describe_jobs",
        title="Describe jobs",
        annotations=READ,
        description=(
            "Call first: the jobs this server can enqueue (queue, input schema, retry, timeout, "
            "concurrency, tenancy) and the cron tasks. Errors: JOB_UNKNOWN (details.known)."
        ),
    )
    async def describe_jobs_tool(
        ctx: ToolContext,
        name: Annotated[str | None, Field(description="one job; omit for all")] = None,
        limit: Annotated[
            int, Field(description="page size", ge=1, le=page_cap), ServerCap("items")
        ] = SHOWN,
        cursor: Annotated[
            str | None, Field(description="from the last page", max_length=MAX_ANY_CURSOR_BYTES)
        ] = None,
    ) -> Annotated[CallToolResult, DescribeJobsResult]:
        return await run_tool(
            ctx,
            "describe_jobs",
            lambda s: operations.describe_jobs(s, name, limit=limit, cursor=cursor),
        )

    @server.tool(
        name="list_jobs",
        title="List jobs",
        annotations=READ,
        description=(
            "Jobs, newest first; pass next_cursor back as cursor. Errors: INVALID_ARGUMENT, "
            "LIMIT_EXCEEDED, CURSOR_INVALID (call again without it), TENANT_PINNED."
        ),
    )
    async def list_jobs_tool(
        ctx: ToolContext,
        state: Annotated[
            JobState | list[JobState] | None, Field(description="one or a list")
        ] = None,
        name: Annotated[str | None, Field(description="job name")] = None,
        queue: Annotated[str | None, Field(description="queue")] = None,
        tenant_id: Annotated[str | None, Field(description="tenant")] = None,
        limit: Annotated[
            int,
            Field(description="page size", ge=1, le=page_cap),
            ServerCap("rows"),
        ] = 50,
        cursor: Annotated[
            str | None,
            Field(
                description="the last page's next_cursor (same filters)",
                max_length=MAX_ANY_CURSOR_BYTES,
            ),
        ] = None,
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
        meta=UI_META,  # rendered by the MCP App (server.apps_ui)
        title="Inspect a job",
        annotations=READ,
        description=(
            "One job in full, to see why it failed or is stuck: record, steps and events (newest "
            "first; totals, cursors), lease, retry delays, next attempt. Errors: JOB_NOT_FOUND, "
            "CURSOR_INVALID (call again without it)."
        ),
    )
    async def inspect_job_tool(
        ctx: ToolContext,
        job_id: JobId,
        steps_limit: Annotated[
            int,
            Field(description="steps in this page", ge=1, le=MAX_TRACE_PAGE),
        ] = DEFAULT_TRACE_PAGE,
        steps_cursor: Annotated[
            str | None,
            Field(description="from the last page", max_length=MAX_ANY_CURSOR_BYTES),
        ] = None,
        events_limit: Annotated[
            int,
            Field(description="events in this page", ge=1, le=MAX_TRACE_PAGE),
        ] = DEFAULT_TRACE_PAGE,
        events_cursor: Annotated[
            str | None,
            Field(description="from the last page", max_length=MAX_ANY_CURSOR_BYTES),
        ] = None,
        run_id: Annotated[
            str | None,
            Field(
                description="an earlier run (job.rerun_of): its steps, one page",
                min_length=1,
                max_length=MAX_ID_BYTES,
            ),
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
                run_id=run_id,
            ),
        )

    @server.tool(
        name="queue_stats",
        meta=UI_META,  # rendered by the MCP App (server.apps_ui)
        title="Queue statistics",
        annotations=READ,
        description=(
            "Per queue: a count per state (ready: due now; done and cancelled: within "
            "settled_window_ms, an hour or less when busy), oldest ready age, expired "
            "leases, overdue suspensions. diagnose_queue says what they mean."
        ),
    )
    async def queue_stats_tool(
        ctx: ToolContext,
        queues: Annotated[list[str] | None, Field(description="only these queues")] = None,
        limit: Annotated[
            int, Field(description="busiest queues", ge=1, le=page_cap), ServerCap("items")
        ] = SHOWN,
    ) -> Annotated[CallToolResult, QueueStatsResult]:
        return await run_tool(
            ctx, "queue_stats", lambda s: operations.queue_stats(s, queues, limit)
        )

    @server.tool(
        name="diagnose_queue",
        meta=UI_META,  # rendered by the MCP App (server.apps_ui)
        title="Diagnose queues",
        annotations=READ,
        description=(
            "Start here when jobs stall: findings (code, cause, fix, often next_call) on live "
            "workers, expired leases, backlog, dead letters, unknown names, overdue suspensions, "
            "pending backfills."
        ),
    )
    async def diagnose_queue_tool(
        ctx: ToolContext,
        queue: Annotated[str | None, Field(description="only this queue")] = None,
    ) -> Annotated[CallToolResult, DiagnoseQueueResult]:
        # A queue in another spelling is mended to the call with the known one, as queue_stats'.
        return await run_tool(
            ctx, "diagnose_queue", lambda s: operations.diagnose_queue(s, queue, mend=mended)
        )

    @server.tool(
        name="database_report",
        title="Database report",
        annotations=READ,
        description=(
            "The fix of DRIVER_UNAVAILABLE and STORAGE_FULL: the database server's state, read "
            "from this server (reachable, settings, schema, privileges, sessions, transactions)."
        ),
    )
    async def database_report_tool(ctx: ToolContext) -> Annotated[CallToolResult, DbReportResult]:
        return await run_tool(ctx, "database_report", operations.database_report)

    @server.tool(
        name="wait_for_job",
        title="Wait for a job",
        annotations=READ,
        description=(
            "Wait until a job settles (done, failed, dead, cancelled) or timeout_seconds pass; "
            "settled false: call again. Errors: JOB_NOT_FOUND, LIMIT_EXCEEDED."
        ),
    )
    async def wait_for_job_tool(
        ctx: ToolContext,
        job_id: JobId,
        timeout_seconds: Annotated[
            float | None,
            Field(
                description=f"seconds to wait (default {limits.default_wait_seconds:g})",
                ge=0,
                le=wait_cap,
            ),
            ServerCap("seconds"),
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
            "Declared backfills (one-off data sweeps) and their state here; `name`: one, with a "
            "page of its runs. Errors: BACKFILL_UNKNOWN, CURSOR_INVALID, INVALID_ARGUMENT "
            "(paging without name)."
        ),
    )
    async def list_backfills_tool(
        ctx: ToolContext,
        pending_only: Annotated[bool, Field(description="only those not completed here")] = False,
        name: Annotated[
            str | None,
            Field(description="one backfill"),
        ] = None,
        runs_limit: Annotated[
            int | None,
            Field(
                description="with name: runs in this page (default 20)",
                ge=1,
                le=MAX_RUNS_PAGE,
            ),
        ] = None,
        runs_cursor: Annotated[
            str | None,
            Field(
                description="with name: from the last answer",
                max_length=MAX_ANY_CURSOR_BYTES,
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
