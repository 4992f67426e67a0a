"""The mutating tools, registered over the operations: enqueue, retry, cancel, run a backfill,
prune history.
None is registered on a read-only server.

Every call is recorded as an event (`calls.run_tool(audit=...)`), and the engine writes its own
`cancelled`/`requeued` events with the actor `mcp:<tool>`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from mcp_jobs import operations
from mcp_jobs.operations.models import (
    CancelJobResult,
    EnqueueJobResult,
    RetryJobResult,
    RunBackfillResult,
)
from mcp_jobs.operations.prune import TOOL_MAX_BATCHES, PruneHistoryResult
from mcp_jobs.server.audit import Subject
from mcp_jobs.server.calls import ToolContext, run_tool
from mcp_jobs.server.state import AppState
from schemas.jobs import OnConflict


def _writes(*, destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


SettledState = Literal["done", "failed", "dead", "cancelled"]

JobId = Annotated[str, Field(description="the job's id, as enqueue_job or list_jobs returned it")]


def _job_of(model: RetryJobResult | CancelJobResult) -> Subject:
    return (model.job.id, model.job.tenant_id) if model.job is not None else (None, None)


def register(server: MCPServer[AppState]) -> None:
    @server.tool(
        name="enqueue_job",
        title="Enqueue a job",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
        description=(
            "Enqueue a registered job. `input` is validated against the job's input schema "
            "(describe_jobs shows it). A live job with the same idempotency key is not duplicated: "
            "its id comes back with `deduped: true` (or JOB_DUPLICATE with on_conflict='error'). "
            "Errors: JOB_UNKNOWN, JOB_INPUT_INVALID (details.errors lists each field), "
            "JOB_TENANT_REQUIRED, LIMIT_EXCEEDED (input over the size cap), INVALID_ARGUMENT."
        ),
    )
    async def enqueue_job_tool(
        ctx: ToolContext,
        name: Annotated[str, Field(description="the job's name (describe_jobs lists them)")],
        input: Annotated[
            dict[str, Any], Field(description="the job's input, matching its input schema")
        ],
        tenant_id: Annotated[
            str | None, Field(description="the tenant the job runs for; required by some jobs")
        ] = None,
        delay_seconds: Annotated[
            float | None, Field(description="run no sooner than this many seconds from now")
        ] = None,
        run_at: Annotated[
            int | None, Field(description="run no sooner than this time (epoch ms)")
        ] = None,
        on_conflict: Annotated[
            OnConflict,
            Field(description="'dedupe' returns a live duplicate's id; 'error' refuses it"),
        ] = "dedupe",
    ) -> Annotated[CallToolResult, EnqueueJobResult]:
        return await run_tool(
            ctx,
            "enqueue_job",
            lambda s: operations.enqueue_job(
                s,
                name,
                input,
                tenant_id=tenant_id,
                delay_seconds=delay_seconds,
                run_at=run_at,
                on_conflict=on_conflict,
            ),
            audit={"name": name, "tenant_id": tenant_id, "on_conflict": on_conflict},
            subject=lambda m: (m.job_id, m.tenant_id),
        )

    @server.tool(
        name="retry_job",
        title="Retry a job",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
        description=(
            "Requeue a failed or dead job now, with its attempts reset; steps it already "
            "completed are not run again. A cancelled job is only requeued with "
            "include_cancelled=true. Errors: JOB_NOT_FOUND, JOB_NOT_RETRYABLE (it is live or "
            "done, or cancelled without include_cancelled), JOB_DUPLICATE (another live job now "
            "holds its idempotency key)."
        ),
    )
    async def retry_job_tool(
        ctx: ToolContext,
        job_id: JobId,
        include_cancelled: Annotated[
            bool, Field(description="also requeue a job an operator cancelled")
        ] = False,
    ) -> Annotated[CallToolResult, RetryJobResult]:
        return await run_tool(
            ctx,
            "retry_job",
            lambda s: operations.retry_job(s, job_id, include_cancelled),
            audit={"job_id": job_id, "include_cancelled": include_cancelled},
            subject=_job_of,
        )

    @server.tool(
        name="cancel_job",
        title="Cancel a job",
        annotations=_writes(destructive=True, idempotent=True),
        description=(
            "Cancel a live job (ready, delayed, running or suspended). Cancelled is final: it is "
            "never claimed again, and only retry_job with include_cancelled=true brings it back. "
            "A running job is told to stop at its next heartbeat (`stopping: true`). Errors: "
            "JOB_NOT_FOUND, JOB_NOT_CANCELLABLE (it already settled)."
        ),
    )
    async def cancel_job_tool(
        ctx: ToolContext, job_id: JobId
    ) -> Annotated[CallToolResult, CancelJobResult]:
        return await run_tool(
            ctx,
            "cancel_job",
            lambda s: operations.cancel_job(s, job_id),
            audit={"job_id": job_id},
            subject=_job_of,
        )

    @server.tool(
        name="run_backfill",
        title="Run a backfill",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
        description=(
            "Rehearse or run a declared backfill (a one-off sweep over the app's data). By "
            "default a DRY RUN: rows and batches it would sweep, sample keys, and `blocked_by` "
            "if a write would be refused; nothing is written. write=true starts it as a durable "
            "job (follow it with wait_for_job, or pass wait_seconds to follow it here with "
            "progress). Errors: BACKFILL_UNKNOWN, BACKFILL_ENVIRONMENT, "
            "BACKFILL_MIGRATION_PENDING, BACKFILL_APPLIED (rerun needs force=true), "
            "BACKFILL_RUNNING (a pass is live: inspect it)."
        ),
    )
    async def run_backfill_tool(
        ctx: ToolContext,
        name: Annotated[str, Field(description="the backfill's name (list_backfills lists them)")],
        write: Annotated[
            bool, Field(description="false (default): dry run only; true: start the sweep")
        ] = False,
        force: Annotated[bool, Field(description="rerun one that already completed here")] = False,
        wait_seconds: Annotated[
            float, Field(description="with write: follow the pass up to this long (max 50)")
        ] = 0,
    ) -> Annotated[CallToolResult, RunBackfillResult]:
        return await run_tool(
            ctx,
            "run_backfill",
            lambda s: operations.run_backfill(
                s, name, write=write, force=force, wait_seconds=wait_seconds
            ),
            audit={"name": name, "write": write, "force": force} if write else None,
            subject=lambda m: (m.start.job_id if m.start is not None else None, None),
        )

    @server.tool(
        name="prune_history",
        title="Prune settled history",
        annotations=_writes(destructive=True, idempotent=True),
        description=(
            "Delete settled jobs (done, failed, dead, cancelled) past their retention, with their "
            "steps and events; live jobs are never touched. By default a DRY RUN: counts per "
            "state and queue of what would go, and the cutoffs used (the workers' policy: done "
            "and cancelled 7 days, failed and dead 30 days unless configured). write=true "
            f"deletes, at most {TOOL_MAX_BATCHES} batches per call (`more: true`: call again). "
            "older_than_seconds replaces the policy for this call. On a tenant-pinned server "
            "only that tenant's jobs are pruned. Errors: INVALID_ARGUMENT."
        ),
    )
    async def prune_history_tool(
        ctx: ToolContext,
        write: Annotated[
            bool, Field(description="false (default): dry run only; true: delete")
        ] = False,
        older_than_seconds: Annotated[
            int | None,
            Field(
                description="prune rows finished more than this many seconds ago, instead of "
                "the retention policy",
                ge=0,
            ),
        ] = None,
        states: Annotated[
            list[SettledState] | None,
            Field(description="only these settled states (default: all four)", max_length=4),
        ] = None,
    ) -> Annotated[CallToolResult, PruneHistoryResult]:
        return await run_tool(
            ctx,
            "prune_history",
            lambda s: operations.prune_history(
                s,
                write=write,
                older_than=older_than_seconds,
                states=states,
                max_batches=TOOL_MAX_BATCHES,
            ),
            audit={"write": write, "older_than_seconds": older_than_seconds, "states": states}
            if write
            else None,
            subject=lambda m: (None, m.tenant_id),
        )
