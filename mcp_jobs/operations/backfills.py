"""The backfill operations: list the declared backfills, rehearse or run one, follow a pass."""

from __future__ import annotations

import math

from engine.errors import InvalidArgumentError
from mcp_jobs.errors import LimitExceededError, TenantScopeExceededError, example_call
from mcp_jobs.operations.models import ListBackfillsResult, RunBackfillResult
from mcp_jobs.operations.scope import Scope
from schemas.backfill import BackfillRun
from schemas.states import SETTLED_STATES

# How often a followed pass's ledger row is read for progress.
BACKFILL_POLL_MS = 250


async def list_backfills(scope: Scope, pending_only: bool = False) -> ListBackfillsResult:
    states = await scope.backfills().list(pending_only=pending_only)
    return ListBackfillsResult(ok=True, environment=scope.settings.environment, backfills=states)


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
