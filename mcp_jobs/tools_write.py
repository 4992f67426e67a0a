"""The mutating tools: enqueue, retry, cancel, run a backfill. None is registered read-only.

Every call is recorded as an event (`runtime.run_tool(audit=...)`), and the engine writes its own
`cancelled`/`requeued` events with the actor `mcp:<tool>`.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from engine.errors import InvalidArgumentError
from mcp_jobs.config import Scope
from mcp_jobs.errors import LimitExceededError, TenantScopeExceededError, example_call
from mcp_jobs.models import CancelJobResult, EnqueueJobResult, JobSummary, RetryJobResult
from mcp_jobs.models_backfill import RunBackfillResult
from mcp_jobs.runtime import AppState, Subject, ToolContext, run_tool
from schemas.backfill import BackfillRun
from schemas.jobs import OnConflict
from schemas.states import SETTLED_STATES

BACKFILL_POLL_MS = 250

# --- operations ---------------------------------------------------------------------------------


async def enqueue_job(
    scope: Scope,
    name: str,
    input: dict[str, Any],
    *,
    tenant_id: str | None = None,
    delay_seconds: float | None = None,
    run_at: int | None = None,
    on_conflict: OnConflict = "dedupe",
) -> EnqueueJobResult:
    size = len(json.dumps(input, separators=(",", ":"), default=str).encode())
    cap = scope.settings.limits.max_input_bytes
    if size > cap:
        raise LimitExceededError(
            "input",
            size,
            cap,
            "bytes",
            f"enqueue_job {example_call({'name': name, 'input': {'ref': '<stored data id>'}})}",
        )
    tenant = scope.tenant(tenant_id)
    result = await scope.jobs.enqueue(
        name,
        input,
        tenant_id=tenant,
        delay=delay_seconds,
        run_at=run_at,
        on_conflict=on_conflict,
        enqueued_by=scope.actor,
    )
    return EnqueueJobResult(
        ok=True,
        job_id=result.id,
        run_id=result.run_id,
        name=name,
        tenant_id=tenant,
        state=result.state,
        deduped=result.deduped,
    )


async def retry_job(scope: Scope, job_id: str, include_cancelled: bool = False) -> RetryJobResult:
    record = await scope.jobs.retry(
        job_id,
        tenant_id=scope.tenant(None),
        include_cancelled=include_cancelled,
        actor=scope.actor,
    )
    return RetryJobResult(ok=True, job=JobSummary.of(record))


async def cancel_job(scope: Scope, job_id: str) -> CancelJobResult:
    record = await scope.jobs.cancel(job_id, tenant_id=scope.tenant(None), actor=scope.actor)
    return CancelJobResult(ok=True, job=JobSummary.of(record), stopping=record.cancel_requested)


async def run_backfill(
    scope: Scope,
    name: str,
    *,
    write: bool = False,
    force: bool = False,
    wait_seconds: float = 0,
) -> RunBackfillResult:
    if scope.settings.tenant is not None:
        # A backfill sweeps the app's own tables across every tenant; a pinned server must not
        # start one on another tenant's data.
        raise TenantScopeExceededError(
            f'backfill "{name}"', scope.settings.tenant, f"mcp-jobs backfill {name} --json"
        )
    svc = scope.backfills()
    if not write:
        # With force, the plan's `blocked_by` says what a forced write would answer.
        plan = await svc.dry_run(name, force=force)
        return RunBackfillResult(ok=True, mode="dry_run", plan=plan)
    limits = scope.settings.limits
    _check_wait(wait_seconds, limits.max_wait_seconds, name)
    start = await svc.write(name, force=force, actor=scope.actor)
    result = RunBackfillResult(ok=True, mode="write", start=start)
    if wait_seconds <= 0:
        return result
    run, settled = await follow_backfill(
        scope, start.name, start.run_id, start.job_id, wait_seconds
    )
    return result.model_copy(update={"run": run, "settled": settled})


def _check_wait(wait_seconds: float, cap: float, name: str) -> None:
    if isinstance(wait_seconds, bool) or not isinstance(wait_seconds, int | float):
        raise InvalidArgumentError("wait_seconds", wait_seconds, "a number of seconds ≥ 0")
    if not wait_seconds >= 0:
        raise InvalidArgumentError("wait_seconds", wait_seconds, "a number of seconds ≥ 0")
    if wait_seconds > cap or math.isinf(wait_seconds):
        call = example_call({"name": name, "write": True, "wait_seconds": int(cap)})
        raise LimitExceededError(
            "wait_seconds", wait_seconds, int(cap), "seconds", f"run_backfill {call}"
        )


async def follow_backfill(
    scope: Scope, name: str, run_id: str, job_id: str, wait_seconds: float
) -> tuple[BackfillRun | None, bool]:
    """Report the pass's progress from its ledger row until its job settles or the wait ends."""
    clock = scope.jobs.clock
    deadline = clock.now_ms() + int(wait_seconds * 1000)
    env = scope.settings.environment
    while True:
        runs = await scope.jobs.driver.backfill_runs(name, env)
        run = next((r for r in runs if r.run_id == run_id), None)
        job = await scope.jobs.get(job_id)
        settled = job.state in SETTLED_STATES
        if run is not None:
            total = run.rows_total if run.rows_total is not None else None
            await scope.progress(
                float(run.rows_processed),
                float(total) if total is not None else None,
                f"{run.status}: {run.rows_processed} row(s)",
            )
        now = clock.now_ms()
        if settled or now >= deadline:
            return run, settled
        await clock.sleep_ms(min(BACKFILL_POLL_MS, deadline - now))


# --- registration -------------------------------------------------------------------------------


def _writes(*, destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


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
            lambda s: enqueue_job(
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
            lambda s: retry_job(s, job_id, include_cancelled),
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
            lambda s: cancel_job(s, job_id),
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
            lambda s: run_backfill(s, name, write=write, force=force, wait_seconds=wait_seconds),
            audit={"name": name, "write": write, "force": force} if write else None,
            subject=lambda m: (m.start.job_id if m.start is not None else None, None),
        )
