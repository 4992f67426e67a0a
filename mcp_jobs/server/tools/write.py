"""The mutating tools, registered over the operations: enqueue, retry, cancel, run a backfill,
prune history.
None is registered on a read-only server.

Every call is recorded as an event (`calls.run_tool(audit=...)`), and the engine writes its own
`cancelled`/`requeued` events with the actor `mcp:<tool>`.
"""

# No `from __future__ import annotations`: the SDK reads each tool's signature at
# registration, and the bounds in it are this server's limits, local to `register`.

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer, Resolve
from mcp.server.mcpserver.resolve import ElicitationResult
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from engine.bounds import MAX_DELAY_SECONDS, MAX_NAME_BYTES
from engine.instants import EARLIEST_MS, MAX_TIME_CHARS
from engine.rules import PRIORITY_MAX, PRIORITY_MIN
from mcp_jobs import operations
from mcp_jobs.config import ServerLimits
from mcp_jobs.operations.backfills import wait_needs_write
from mcp_jobs.operations.models import (
    CancelJobResult,
    EnqueueJobResult,
    RetryJobResult,
    RunBackfillResult,
)
from mcp_jobs.operations.prune import TOOL_MAX_BATCHES, PruneHistoryResult
from mcp_jobs.operations.scope import Scope
from mcp_jobs.server import confirm_bulk
from mcp_jobs.server.arguments import ServerCap
from mcp_jobs.server.audit import Subject
from mcp_jobs.server.calls import ToolContext, run_tool
from mcp_jobs.server.confirm import (
    ConfirmWrite,
    Planned,
    WriteGate,
    asker,
    can_elicit,
    guarded,
)
from mcp_jobs.server.confirm_plans import (
    backfill_planner,
    backfill_write,
    prune_planner,
    prune_write,
)
from mcp_jobs.server.state import AppState
from mcp_jobs.server.tools import pauses
from schemas.jobs import OnConflict


def _writes(*, destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


SettledState = Literal["done", "failed", "dead", "cancelled"]

JobId = Annotated[str, Field(description="from enqueue_job or list_jobs")]

ConfirmToken = Annotated[
    str | None,
    Field(
        description="with write: the dry run's confirm.token",
        max_length=1024,
    ),
]

# The largest integer every JSON client holds exactly (2^53 - 1, JavaScript's safe integer),
# published as run_at's maximum. The engine checks the bound that matters, ten years from now,
# which moves with the clock: its refusal's fix is the call at that bound (`arguments.mended`).
# Its minimum (2001) the engine checks too: a value in epoch seconds is mended to milliseconds,
# not to the range's end (engine.instants.EARLIEST_MS).
MAX_RUN_AT_MS = 2**53 - 1


def _job_of(model: RetryJobResult | CancelJobResult) -> Subject:
    return (model.job.id, model.job.tenant_id) if model.job is not None else (None, None)


def _offers(ctx: ToolContext, scope: Scope) -> bool:
    """A dry run hands a confirm token to a client that cannot be asked instead."""
    return scope.settings.confirm_writes and not can_elicit(ctx)


def register(server: MCPServer[AppState], limits: ServerLimits) -> None:
    """The mutating tools; `limits` bound the arguments the server caps (published as the
    schema's `maximum`)."""
    wait_cap = limits.max_wait_seconds
    # One gate per server: its confirm tokens' secret and which tokens were spent.
    gate = WriteGate()
    plan_backfill = backfill_planner(gate)
    ask_backfill = asker(plan_backfill)
    plan_prune = prune_planner(gate)
    ask_prune = asker(plan_prune)

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
            "Enqueue a job (describe_jobs: its input schema and priority). A live job with the "
            "same idempotency key answers instead: deduped true, or JOB_DUPLICATE with "
            "on_conflict='error'. Errors: JOB_UNKNOWN, JOB_INPUT_INVALID (details.errors), "
            "JOB_TENANT_REQUIRED, IDEMPOTENCY_KEY_MISSING, LIMIT_EXCEEDED, INVALID_ARGUMENT."
        ),
    )
    async def enqueue_job_tool(
        ctx: ToolContext,
        name: Annotated[str, Field(description="a job describe_jobs lists")],
        input: Annotated[dict[str, Any], Field(description="matching the job's input schema")],
        tenant_id: Annotated[str | None, Field(description="the tenant it runs for")] = None,
        delay_seconds: Annotated[
            float | None,
            Field(
                description="run no sooner than this from now",
                ge=0,
                le=MAX_DELAY_SECONDS,
            ),
        ] = None,
        run_at: Annotated[
            Annotated[
                int, Field(json_schema_extra={"minimum": EARLIEST_MS, "maximum": MAX_RUN_AT_MS})
            ]
            | Annotated[
                str,
                Field(max_length=MAX_TIME_CHARS, json_schema_extra={"format": "date-time"}),
            ]
            | None,
            Field(
                description="run no sooner than this: epoch milliseconds (not seconds), or ISO "
                "8601 with its zone; ten years ahead at most",
            ),
        ] = None,
        on_conflict: Annotated[
            OnConflict,
            Field(description="on a live duplicate: its id, or an error"),
        ] = "dedupe",
        key: Annotated[
            str | None,
            Field(description="idempotency key; needed when describe_jobs says key_required"),
        ] = None,
        priority: Annotated[
            int | None,
            Field(
                description="higher is claimed first; default: the job's declared priority",
                ge=PRIORITY_MIN,
                le=PRIORITY_MAX,
            ),
        ] = None,
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
                key=key,
                priority=priority,
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
            "Run a failed or dead job (attempts reset) or a delayed one (attempts kept) now; "
            "completed steps kept. With from_step (a done job too): a new run (rerun_of links the "
            "old, its steps in inspect_job run_id) keeping only those before that step. Errors: "
            "JOB_NOT_FOUND, JOB_NOT_RETRYABLE (ready, running, suspended, done, cancelled), "
            "JOB_DUPLICATE (a live job holds its key), STEP_UNKNOWN, STEP_NOT_RERUNNABLE."
        ),
    )
    async def retry_job_tool(
        ctx: ToolContext,
        job_id: JobId,
        include_cancelled: Annotated[bool, Field(description="also a cancelled job")] = False,
        from_step: Annotated[
            str | None,
            Field(
                description="rerun from this step of the run (inspect_job lists them)",
                min_length=1,
                max_length=MAX_NAME_BYTES,
            ),
        ] = None,
    ) -> Annotated[CallToolResult, RetryJobResult]:
        return await run_tool(
            ctx,
            "retry_job",
            lambda s: operations.retry_job(s, job_id, include_cancelled, from_step),
            audit={
                "job_id": job_id,
                "include_cancelled": include_cancelled,
                "from_step": from_step,
            },
            subject=_job_of,
        )

    @server.tool(
        name="cancel_job",
        title="Cancel a job",
        annotations=_writes(destructive=True, idempotent=True),
        description=(
            "Cancel a live job (retry_job include_cancelled revives it). A running one stops at "
            "its next heartbeat (stopping). Errors: JOB_NOT_FOUND, JOB_NOT_CANCELLABLE (done, "
            "failed or dead)."
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
            "A backfill: by default a DRY RUN (rows, batches, sample keys; blocked_by: what a "
            "write would answer); write=true starts a durable pass (follow it with wait_for_job) "
            "once the person confirms. Errors: BACKFILL_UNKNOWN, BACKFILL_ENVIRONMENT, "
            "BACKFILL_MIGRATION_PENDING, BACKFILL_APPLIED (force=true reruns), BACKFILL_RUNNING, "
            "WRITE_DECLINED, CONFIRMATION_REQUIRED."
        ),
    )
    async def run_backfill_tool(
        ctx: ToolContext,
        planned: Annotated[Planned, Resolve(plan_backfill)],
        answer: Annotated[ElicitationResult[ConfirmWrite], Resolve(ask_backfill)],
        name: Annotated[str, Field(description="one list_backfills lists")],
        write: Annotated[bool, Field(description="start the sweep")] = False,
        force: Annotated[bool, Field(description="rerun one completed here")] = False,
        wait_seconds: Annotated[
            float,
            Field(
                description="with write: follow the pass this long",
                ge=0,
                le=wait_cap,
            ),
            ServerCap("seconds"),
        ] = 0,
        confirm: ConfirmToken = None,
    ) -> Annotated[CallToolResult, RunBackfillResult]:
        spec = backfill_write(name, force, wait_seconds)

        async def call(s: Scope) -> RunBackfillResult:
            wait_needs_write(write, wait_seconds)  # the dry run below is planned without it
            return await guarded(s, gate, spec, planned, answer, confirm, _offers(ctx, s))

        return await run_tool(
            ctx,
            "run_backfill",
            call,
            audit={"name": name, "write": write, "force": force} if write else None,
            subject=lambda m: (m.start.job_id if m.start is not None else None, None),
        )

    @server.tool(
        name="prune_history",
        title="Prune settled history",
        annotations=_writes(destructive=True, idempotent=True),
        description=(
            "Delete settled jobs past retention, with their steps and events. By default a DRY "
            f"RUN (counts, cutoffs); write=true deletes up to {TOOL_MAX_BATCHES} batches a call "
            "(more: call again) once the person confirms. A tenant-pinned server prunes its "
            "tenant only. Errors: INVALID_ARGUMENT, WRITE_DECLINED, CONFIRMATION_REQUIRED."
        ),
    )
    async def prune_history_tool(
        ctx: ToolContext,
        planned: Annotated[Planned, Resolve(plan_prune)],
        answer: Annotated[ElicitationResult[ConfirmWrite], Resolve(ask_prune)],
        write: Annotated[bool, Field(description="delete")] = False,
        older_than_seconds: Annotated[
            int | None,
            Field(
                description="rows finished this long ago, not the retention policy's",
                ge=0,
                le=MAX_DELAY_SECONDS,
            ),
        ] = None,
        states: Annotated[
            list[SettledState] | None,
            Field(description="only these (default: all)", max_length=4),
        ] = None,
        confirm: ConfirmToken = None,
    ) -> Annotated[CallToolResult, PruneHistoryResult]:
        spec = prune_write(older_than_seconds, states)
        return await run_tool(
            ctx,
            "prune_history",
            lambda s: guarded(s, gate, spec, planned, answer, confirm, _offers(ctx, s)),
            audit={"write": write, "older_than_seconds": older_than_seconds, "states": states}
            if write
            else None,
            subject=lambda m: (None, m.tenant_id),
        )

    # Bulk retry/cancel by filter, confirmed through the same gate (`server.confirm_bulk`).
    confirm_bulk.register(server, gate)

    # Pause and resume a queue or a job name (`tools.pauses`).
    pauses.register(server)
