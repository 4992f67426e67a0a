"""Prompts: the two procedures an operator most often asks an agent to follow."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from engine.errors import JobsError
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.stats import queue_stats
from mcp_jobs.server.served import request_scope
from mcp_jobs.server.state import AppState


def diagnose_stalled_jobs_text(queue: str | None = None, *, read_only: bool = False) -> str:
    where = f"queue `{queue}`" if queue else "every queue"
    arg = f'"queue": {json.dumps(queue, ensure_ascii=False)}' if queue else ""
    retry = (
        "this server is read-only: give the user `mcp-jobs jobs retry <job_id>` for each"
        if read_only
        else "call `retry_job` on each such job, then `wait_for_job` on one of\n   them "
        "until `settled` is true and `job.state` is `done`"
    )
    run_now = (
        "give the user\n   its `fix` (it prints the plan and the command that acts)"
        if read_only
        else "issue its\n   `next_call`: a plan, nothing retried yet. Tell the user "
        "`plan.matched` and, with their\n   go-ahead, issue it again with `write: true`"
    )
    return f"""Jobs in {where} seem stalled or failing. Find out why and fix what is safe to fix.

1. Call `diagnose_queue {{{arg}}}`. Each of its `findings[]` has a `code`, a `cause` with the
   numbers, a one-line `fix`, and often a `next_call` you can issue as is.
2. For NO_LIVE_WORKERS, LEASES_EXPIRED, BACKLOG_OLD, SUSPENSIONS_OVERDUE or PARKED_UNKNOWN_NAME
   the fix is an operator command (start or scale a worker with the right `--app`/`--queues`).
   Tell the user the exact command; you cannot run it through these tools.
3. For DEAD_LETTERS, call `inspect_job` on each of the finding's `job_ids`. Read
   `job.last_error`, the failed step (`steps[].status` is `failed`) and `events`. Decide whether
   the cause was transient (a timeout, an outage that is over) or a bug or bad input that would
   fail again. A JOB_SLOT_LOST whose `events` include one of kind "heartbeat_late" is a bug:
   the job's code blocked the worker's event loop, and a retry would block it again (tell the
   user that event's cause).
4. Only for transient causes, {retry}.
5. RETRIES_WAITING is no fault: those jobs run again by themselves after their backoff. Once
   their cause is over (the user says so, or it was transient as in step 3), {run_now}.
   Nor is EVENTS_AWAITED (jobs waiting for an event): send it only if the user says it happened.
6. Never retry a cancelled job unless the user asks (`include_cancelled: true`), and never
   cancel a running job without saying why.
7. Finish with `queue_stats` and a short report:
   what was wrong, what you did, what the user still has to do.

Every tool error carries `error.code`, `error.cause`, `error.fix` and sometimes
`error.next_call`: act on those instead of guessing. DRIVER_UNAVAILABLE or STORAGE_FULL means
the database itself is at fault: call `database_report` and tell the user what it says.
STORE_DAMAGED means stored data is damaged or was overwritten: retry nothing, and give the user
its cause and fix."""


def run_backfill_safely_text(name: str) -> str:
    quoted = json.dumps(name, ensure_ascii=False)  # inside the calls' JSON
    return f"""Run the backfill `{name}` safely.

1. Call `list_backfills {{"name": {quoted}}}` and read its `backfills[]` entry: `pending`,
   `environments`, `last_run` and `live_job_id`. If `live_job_id` is set, a pass is live: do
   not start another, follow it with `wait_for_job` on that id.
2. Rehearse: `run_backfill {{"name": {quoted}}}` (a dry run writes nothing). Report
   `plan.rows_remaining`, `plan.batches` and `plan.sample_keys` to the user.
3. If the dry run itself fails, `error.code` says why: BACKFILL_MIGRATION_PENDING means a
   precondition (a migration) is missing, so nothing can be counted yet. Stop and give the user
   `error.fix`: the command that applies it, or what to apply where none is declared.
4. If `plan.blocked_by` is set, a write would be refused: stop and explain
   `plan.blocked_by.code`. BACKFILL_APPLIED means it already completed here (rerunning needs
   `force: true` and the user's explicit go-ahead); BACKFILL_RUNNING means a pass is live;
   BACKFILL_ENVIRONMENT means this environment is not declared. Follow `plan.blocked_by.fix`.
5. Tell the user the row count and that you are about to write.
6. Write: `run_backfill {{"name": {quoted}, "write": true}}`. The server asks the user to
   confirm the plan it shows (rows, batches, environment) before anything is written; never
   answer for them. If `error.code` is WRITE_DECLINED, the user said no: stop. If it is
   CONFIRMATION_REQUIRED, your client cannot show that question: quote `error.details.plan`
   (`rows_remaining`, `batches`) to the user and only once they agree issue `error.next_call`
   as is (its single-use `confirm` token expires in minutes; if refused, rehearse again). Then
   call `wait_for_job` with `start.job_id` until `settled` is true (call again while false).
7. Confirm with `list_backfills {{"name": {quoted}}}`: `pending` should be false and
   `last_run.status` `completed`, with `last_run.rows_processed` rows. If the pass failed,
   `inspect_job` the job and report the failed batch step and its error; do not force a rerun
   without the user."""


def register(server: MCPServer[AppState], *, read_only: bool) -> None:
    @server.prompt(
        name="diagnose_stalled_jobs",
        title="Diagnose stalled jobs",
        description="Find why jobs are stuck or failing, retry what is safe, report the rest.",
    )
    async def diagnose_stalled_jobs(ctx: Context[AppState, Any], queue: str | None = None) -> str:
        if queue:  # "" is a client's blank form field: every queue
            await require_known(ctx, "diagnose_stalled_jobs", "queue", _queue_known(queue))
        return diagnose_stalled_jobs_text(queue, read_only=read_only)

    if read_only:
        return  # the procedure ends in a write this server cannot make

    @server.prompt(
        name="run_backfill_safely",
        title="Run a backfill safely",
        description="Rehearse a backfill, check what would block it, confirm, write, verify.",
    )
    async def run_backfill_safely(name: str, ctx: Context[AppState, Any]) -> str:
        await require_known(ctx, "run_backfill_safely", "name", _backfill_known(name))
        return run_backfill_safely_text(name)


Check = Callable[[Scope], Awaitable[object]]


def _queue_known(queue: str) -> Check:
    # The rule diagnose_queue applies (through queue_stats): known, holding rows, or paused.
    return lambda scope: queue_stats(scope, [queue])


def _backfill_known(name: str) -> Check:
    async def check(scope: Scope) -> None:
        scope.backfills().registry.require(name)

    return check


async def require_known(
    ctx: Context[AppState, Any], prompt: str, argument: str, check: Check
) -> None:
    """The engine's refusal of the name a prompt is about (QUEUE_UNKNOWN, BACKFILL_UNKNOWN: its
    `meant` and the known names in the data) as the prompt's invalid-params error: a procedure
    about a name nothing has would fail at its first call."""
    scope = request_scope(ctx.request_context.lifespan_context, "prompts/get")
    try:
        await check(scope)
    except JobsError as exc:
        data = {"prompt": prompt, "argument": argument, "code": exc.code}
        raise MCPError(
            INVALID_PARAMS,
            f"prompt {prompt}: {exc.code}: {exc.cause}",
            {**data, **(exc.details or {})},
        ) from None
