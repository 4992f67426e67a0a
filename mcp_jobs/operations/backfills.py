"""The backfill operations: list the declared backfills (and the ledger of one no longer declared),
rehearse or run one, follow a pass and answer how it ended."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from engine import bounds
from engine.backfill.errors import BackfillRunningError, BackfillUnknownError, dry_run_command
from engine.backfill.ledger import DEFAULT_RUNS_PAGE, MAX_RUNS_PAGE, parse_runs_cursor
from engine.backfill.pass_job import PASS_QUEUE
from engine.call_retries import within
from engine.errors import (
    LEFT_OUT,
    CursorInvalidError,
    InvalidArgumentError,
    JobCancelledError,
    JobFailedError,
)
from engine.internal_jobs import PASS_JOB
from engine.iso_time import iso
from engine.run_job import error_line
from mcp_jobs.errors import LimitExceededError, example_call
from mcp_jobs.operations.cursors import refuse_foreign
from mcp_jobs.operations.models import Finding, ListBackfillsResult, RunBackfillResult
from mcp_jobs.operations.pause_notice import held_by_pause, held_notices, pauses_for
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.workers import adopt_published_apps, no_worker_notice
from schemas.backfill import BackfillRun, BackfillStart
from schemas.errors import ErrorPayload
from schemas.jobs import JobRecord
from schemas.states import SETTLED_STATES

if TYPE_CHECKING:
    from engine.backfill import Backfills

# How often a followed pass's ledger row is read for progress.
BACKFILL_POLL_MS = 250


async def list_backfills(
    scope: Scope,
    pending_only: bool = False,
    *,
    name: str | None = None,
    runs_limit: int | None = None,
    runs_cursor: str | None = None,
) -> ListBackfillsResult:
    """Every declared backfill's state here; with `name`, that one's state and a page of its
    ledger rows, newest first (`runs_limit`, default 20, at most 200; `runs_cursor` from the
    previous page). The paging arguments need `name`: INVALID_ARGUMENT without it."""
    svc = scope.backfills()
    env = scope.settings.environment
    if name is None:
        for argument, value in (("runs_limit", runs_limit), ("runs_cursor", runs_cursor)):
            if value is not None:
                raise InvalidArgumentError(
                    argument,
                    value,
                    "given with `name`, the backfill whose runs to page",
                    nearest=LEFT_OUT,
                )
        states = await svc.list(pending_only=pending_only)
        return ListBackfillsResult(ok=True, environment=env, backfills=states)
    # Checked before any read, so a bad page argument is refused whatever the ledger holds.
    limit = DEFAULT_RUNS_PAGE if runs_limit is None else runs_limit
    limit = bounds.whole("runs_limit", limit, 1, MAX_RUNS_PAGE)
    if runs_cursor is not None:
        try:
            parse_runs_cursor(runs_cursor, name)
        except CursorInvalidError as exc:
            # Its fix is the name's first page: a name nothing declared or ran is refused first.
            if _undeclared(svc, name):
                await _undeclared_runs(svc, env, name, limit, None)
            if exc.next_call is not None:
                refuse_foreign("list_backfills", "runs_cursor", runs_cursor, exc.next_call)
            raise
    pending_only = bounds.flag("pending_only", pending_only)
    if bounds.text("name", name, bounds.MAX_NAME_BYTES) not in svc.registry:
        async with _declared_elsewhere(scope, name):
            return await _undeclared_runs(svc, env, name, limit, runs_cursor)
    state = await svc.state(name)
    page = await svc.runs_page(state.name, limit=limit, cursor=runs_cursor)
    return ListBackfillsResult(
        ok=True,
        environment=env,
        backfills=[] if pending_only and not state.pending else [state],
        runs=page.runs,
        runs_cursor=page.runs_cursor,
        declared=True,
    )


@asynccontextmanager
async def _declared_elsewhere(scope: Scope, name: str) -> AsyncIterator[None]:
    """BACKFILL_UNKNOWN from a process that imported no app, as it leaves: its fix is the
    rehearsal with the apps the workers published (diagnose's rule), which declare what they
    run; the list of this process's backfills, which is empty, was a dead end."""
    try:
        yield
    except BackfillUnknownError as exc:
        if not (exc.details or {}).get("known") and not scope.fixes.apps:
            await adopt_published_apps(scope)
            if scope.fixes.apps:
                exc.cause = (
                    f"{exc.cause}; the workers here run the app {', '.join(scope.fixes.apps)}"
                )
                exc.fix = scope.fixes.qualify(dry_run_command(name))
        raise


def _undeclared(svc: Backfills, name: str) -> bool:
    """Whether `name` could be a backfill's and this process declares none of it."""
    try:
        return bounds.text("name", name, bounds.MAX_NAME_BYTES) not in svc.registry
    except InvalidArgumentError:  # no backfill can have it: the cursor's fix (the list) says so
        return False


async def _undeclared_runs(
    svc: Backfills, env: str, name: str, limit: int, cursor: str | None
) -> ListBackfillsResult:
    """The ledger of a backfill this process does not declare (a one-off deleted after it ran):
    still the record of what ran, so its runs are paged, with no declared state. With no row
    here, BACKFILL_UNKNOWN, as for a name nobody ever declared."""
    page = await svc.runs_page(name, limit=limit, cursor=cursor)
    if not page.runs and cursor is None:
        svc.registry.require(name)
    return ListBackfillsResult(
        ok=True,
        environment=env,
        backfills=[],
        runs=page.runs,
        runs_cursor=page.runs_cursor,
        declared=False,
    )


async def run_backfill(
    scope: Scope,
    name: str,
    *,
    write: bool = False,
    force: bool = False,
    wait_seconds: float = 0,
    joins: bool | None = None,
) -> RunBackfillResult:
    """A dry run, or a write: its pass started, followed for `wait_seconds`. `joins` (by
    default, whether the write waits): a live pass already holding the name is the answer,
    `deduped`, followed in place of a new one (`_started_or_joined`)."""
    # A backfill sweeps the app's own tables across every tenant; a pinned server must not
    # start one on another tenant's data.
    scope.across_tenants(f'backfill "{name}"', lambda: dry_run_command(name))
    wait_needs_write(write, wait_seconds)
    svc = scope.backfills()
    if not write:
        # With force, the plan's `blocked_by` says what a forced write would answer.
        async with _declared_elsewhere(scope, name):
            plan = await svc.dry_run(name, force=force)
        return RunBackfillResult(ok=True, mode="dry_run", plan=plan)
    limits = scope.settings.limits
    _check_wait(wait_seconds, limits.max_wait_seconds, name)
    joins = wait_seconds > 0 if joins is None else joins
    async with _declared_elsewhere(scope, name):
        start = await _started_or_joined(scope, svc, name, force=force, joins=joins)
    result = RunBackfillResult(ok=True, mode="write", start=start)
    if wait_seconds > 0:
        return await follow_write(scope, result, wait_seconds)
    notices = await _pass_held(scope, start, None)
    return result.model_copy(update={"notices": notices or None})


async def _started_or_joined(
    scope: Scope, svc: Backfills, name: str, *, force: bool, joins: bool
) -> BackfillStart:
    """The write's pass: a new one, or where the caller waits for it (`joins`) the live pass
    already applying it (`deduped`). Refused BACKFILL_RUNNING, a deploy script retrying its
    write met BACKFILL_APPLIED once that pass completed, and exited 1 for a backfill applied.
    A forced write joins none: the live pass may have started before what it is forced for."""
    try:
        return await svc.write(name, force=force, actor=scope.actor, traceparent=scope.traceparent)
    except BackfillRunningError as running:
        if not joins or force:
            raise
        job = await scope.jobs.get(running.job_id)
        given = job.input
        return BackfillStart(
            name=given["name"],
            environment=given["environment"],
            job_id=job.id,
            run_id=given["run_id"],
            deduped=True,
        )


async def follow_write(
    scope: Scope, result: RunBackfillResult, wait_seconds: float
) -> RunBackfillResult:
    """The answer of the write `result` once its pass was followed for `wait_seconds`: the
    pass's ledger row as the wait ended; the pass's own error (`ok` false) when it settled
    without completing; while it has not settled, a RETRIES_WAITING notice when an attempt
    failed and the next waits for its retry, and NO_LIVE_WORKERS when no worker would run it."""
    start = result.start
    assert start is not None
    run, job = await _follow(scope, start.name, start.run_id, start.job_id, wait_seconds)
    settled = job.state in SETTLED_STATES
    if settled and job.state != "done":
        return RunBackfillResult(ok=False, error=pass_failure(start, job, run))
    followed = result.followed(run, settled)
    if settled:
        return followed.model_copy(update={"notices": None})
    notices = [n for n in (retry_notice(start, job),) if n is not None]
    notices += await _pass_held(scope, start, job)
    return followed.model_copy(update={"notices": notices or None})


async def _pass_held(scope: Scope, start: BackfillStart, job: JobRecord | None) -> list[Finding]:
    """What keeps a write's pass (a job on PASS_QUEUE) from running: a pause of its queue or of
    the pass job (QUEUE_PAUSED / JOB_PAUSED, as enqueue_job says), and no worker serving it.
    `job`: the pass as last read, else one just started (ready)."""
    now = scope.jobs.clock.now_ms()
    held = job is None or held_by_pause(job.state, job.run_at, now)
    ids = [start.job_id]
    paused = held_notices(scope, await pauses_for(scope, held), PASS_QUEUE, PASS_JOB, ids)
    what = f'the pass of backfill "{start.name}"'
    worker = await no_worker_notice(scope, PASS_QUEUE, what, ids)
    return paused + ([worker] if worker is not None else [])


def pass_failure(start: BackfillStart, job: JobRecord, run: BackfillRun | None) -> ErrorPayload:
    """The error of a pass that settled without completing, as the pass's own (its code and
    fix), its cause saying which pass, where it stopped and on which attempt."""
    rows = run.rows_processed if run is not None else 0
    if job.state == "cancelled":
        error = JobCancelledError(job.id).to_payload()
    elif job.last_error is not None:
        error = job.last_error
    else:  # a settled failure always stores its error; said plainly should one be missing
        said = run.error if run is not None and run.error else f"the pass {job.state}"
        error = JobFailedError(job.id, said).to_payload()
    cause = (
        f'the pass of backfill "{start.name}" (job {job.id}, ledger run {start.run_id}) '
        f"{job.state} after {rows} row(s), on attempt {job.attempt} of {job.max_attempts}: "
        f"{error.cause}"
    )
    # Its traceback stays with the job (inspect_job): the answer says where to look.
    kept = {k: v for k, v in (error.details or {}).items() if k != "traceback"}
    details = {
        **kept,
        "backfill": start.name,
        "job_id": job.id,
        "run_id": start.run_id,
        "state": job.state,
        "rows_processed": rows,
    }
    return error.model_copy(update={"cause": cause, "details": details})


def retry_notice(start: BackfillStart, job: JobRecord) -> Finding | None:
    """RETRIES_WAITING when the pass's last attempt failed and the next waits for its retry."""
    error = job.last_error
    if job.state != "delayed" or error is None:
        return None
    return Finding(
        code="RETRIES_WAITING",
        severity="warning",
        queue=job.queue,
        cause=f"attempt {job.attempt} of {job.max_attempts} of the pass failed: "
        f"{error_line(error)}; retry at {iso(job.run_at)} (job {job.id}, backfill "
        f'"{start.name}")',
        fix=error.fix,
        next_call=error.next_call,
        job_ids=[job.id],
        last_error=error,
    )


def wait_needs_write(write: bool, wait_seconds: float) -> None:
    """A dry run starts no pass, so it has none to follow: `wait_seconds` there is refused as
    given where it has no use (its fix leaves it out), not ignored while the caller thinks it
    waited. 0, the default, waits for nothing and passes."""
    if not write and wait_seconds:
        raise InvalidArgumentError(
            "wait_seconds",
            wait_seconds,
            "given with write, the pass to follow (a dry run starts none)",
            nearest=LEFT_OUT,
        )


def _check_wait(wait_seconds: float, cap: float, name: str) -> None:
    if isinstance(wait_seconds, bool) or not isinstance(wait_seconds, int | float):
        raise InvalidArgumentError("wait_seconds", wait_seconds, "a number of seconds ≥ 0")
    if not wait_seconds >= 0:
        raise InvalidArgumentError("wait_seconds", wait_seconds, "a number of seconds ≥ 0")
    if wait_seconds > cap or math.isinf(wait_seconds):
        # A tool call; the CLI's FixContext writes it as `mcp-jobs backfill NAME --write …`.
        call = example_call({"name": name, "write": True, "wait_seconds": int(cap)})
        raise LimitExceededError(
            "wait_seconds", wait_seconds, int(cap), "seconds", f"run_backfill {call}"
        )


async def follow_backfill(
    scope: Scope, name: str, run_id: str, job_id: str, wait_seconds: float
) -> tuple[BackfillRun | None, bool]:
    """Report the pass's progress from its ledger row until its job settles or the wait ends."""
    run, job = await _follow(scope, name, run_id, job_id, wait_seconds)
    return run, job.state in SETTLED_STATES


async def _follow(
    scope: Scope, name: str, run_id: str, job_id: str, wait_seconds: float
) -> tuple[BackfillRun | None, JobRecord]:
    """`follow_backfill`, answering the pass job as the wait ended. It ends early when the pass
    waits for a retry due after the wait: nothing settles it before then."""
    clock = scope.jobs.clock
    deadline = clock.now_ms() + int(wait_seconds * 1000)
    svc = scope.backfills()
    # The retries inside end with the wait too: a pass followed for N seconds answers in about N.
    with within(clock, int(wait_seconds * 1000)):
        while True:
            run = await _find_run(svc, name, run_id)
            job = await scope.jobs.get(job_id)
            settled = job.state in SETTLED_STATES
            if run is not None:
                total = run.rows_total if run.rows_total is not None else None
                await scope.progress(
                    float(run.rows_processed),
                    float(total) if total is not None else None,
                    f"{run.status}: {run.rows_processed} row(s)",
                )
            elif not settled:
                # No ledger row yet: the pass job waits for a worker; say whether one can take it.
                notice = await no_worker_notice(scope, job.queue, f'the pass of backfill "{name}"')
                why = f": no live worker serves queue {job.queue} ({notice.fix})" if notice else ""
                await scope.progress(0.0, None, f"pass {job.state}, not started{why}")
            now = clock.now_ms()
            retry_after_wait = job.state == "delayed" and job.run_at >= deadline
            if settled or now >= deadline or (retry_after_wait and job.last_error is not None):
                return run, job
            await clock.sleep_ms(min(BACKFILL_POLL_MS, deadline - now))


async def _find_run(svc: Backfills, name: str, run_id: str) -> BackfillRun | None:
    """The ledger row `run_id` of `name`, read page by page from the newest (a pass just
    started is on the first page), never the whole ledger at once."""
    cursor: str | None = None
    while True:
        page = await svc.runs_page(name, limit=MAX_RUNS_PAGE, cursor=cursor)
        found = next((r for r in page.runs if r.run_id == run_id), None)
        if found is not None or page.runs_cursor is None:
            return found
        cursor = page.runs_cursor
