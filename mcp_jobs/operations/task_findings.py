"""What diagnose finds about the cron tasks, declared here or published by the workers
(engine/tasks/roster.py), read from what the schedulers stored (they run in the workers; this
runs wherever diagnose does):

- TASK_FAILING (critical): its rounds do not fire (the failure its scheduler stored);
- TASK_NOT_SCHEDULED: no live worker running a scheduler declares it, so none fires it
  (critical once occurrences went unfired, a warning before);
- TASK_OVERDUE (warning): a live scheduling worker declares it, yet its last fired occurrence
  lies OVERDUE_AFTER or more occurrences behind its schedule (a catch-up under way, or a scheduler
  that does not lead it);
- TASK_JOBS_DEAD (warning): the job its last fired occurrence enqueued died.

A task may enqueue into any queue, so it is reported in the whole-system diagnosis, and in a
queue's own when it names a job of that queue (the job the stored error names, the dead job).
A tenant-pinned caller sees none: a task spans every tenant, and only its declaration fixes it.
"""

from __future__ import annotations

import json
import re
import shlex

from engine.descriptors import STALE_AFTER_MS
from engine.instants import iso
from engine.tasks import KnownTask, describe_known, task_roster
from engine.tasks.describe import MISSED_COUNTED, TaskDescriptor
from engine.tasks.runs import DEAD_SCAN, TaskDeadRuns
from mcp_jobs.fix_context import PROGRAM, PYTHONS
from mcp_jobs.operations.models import Finding
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.workers import worker_command
from schemas.errors import ErrorPayload, NextCall
from schemas.scheduler import TaskFailure

CODE = "TASK_FAILING"
NOT_SCHEDULED = "TASK_NOT_SCHEDULED"
OVERDUE = "TASK_OVERDUE"
JOBS_DEAD = "TASK_JOBS_DEAD"
# Missed occurrences (each unfired a minute after it was due) that make a task overdue.
OVERDUE_AFTER = 2
_TOOL = re.compile(r"[a-z][a-z_]*")


async def task_findings(scope: Scope, queue: str | None) -> list[Finding]:
    if scope.settings.tenant is not None:
        return []
    roster = await task_roster(scope.jobs)
    described = await describe_known(scope.jobs, roster, count=0)
    findings: list[Finding] = []
    for task, view in zip(roster, described, strict=True):
        for finding in _findings(scope, task, view):
            if queue is None or finding.queue == queue:
                findings.append(finding)
    return findings


def _findings(scope: Scope, task: KnownTask, view: TaskDescriptor) -> list[Finding]:
    found: list[Finding] = []
    if view.failing is not None:
        found.append(_failing(scope, task, view.failing))
    elif view.scheduled is False and not task.retired:
        found.append(_not_scheduled(scope, task, view))
    elif view.scheduled is not False and view.missed >= OVERDUE_AFTER:
        found.append(_overdue(scope, task, view))
    dead = view.dead_runs
    if dead is not None and dead.last_fired:
        found.append(_jobs_dead(scope, task, dead))
    return found


def _named(task: KnownTask) -> str:
    return f'task "{task.name}" (cron "{task.cron}", {task.tz})'


def _target_queue(scope: Scope, error: ErrorPayload) -> str | None:
    """The queue of the job the error names, when one registered here does."""
    named = (error.details or {}).get("job")
    job = scope.jobs.registry.get(named) if isinstance(named, str) else None
    return job.queue if job is not None else None


def _failing(scope: Scope, task: KnownTask, failure: TaskFailure) -> Finding:
    error = failure.error
    queue = _target_queue(scope, error)
    cause = (
        f"{_named(task)} has not fired since {iso(failure.since)}: {failure.rounds} round(s) in "
        f"a row failed, the latest at {iso(failure.last_failed_at)} with {error.code}: "
        f"{error.cause}. Each round tries again; the task's declaration in {task.module} is "
        "what must change"
    )
    if _runnable(error.fix) or _tool_call(error.fix):
        # A line or a tool call, written for the reader like any finding's (a tool call is
        # the `mcp-jobs` command that makes it at the terminal).
        return Finding(
            code=CODE,
            severity="critical",
            queue=queue,
            cause=cause,
            fix=error.fix,
            next_call=error.next_call,
            last_error=error,
        )
    # The error's own fix is code to write (`task(name=…, enqueue=…)`), not a line to run.
    fix = f'change task "{task.name}" in {task.module}, then restart its workers: {error.fix}'
    return Finding(
        code=CODE, severity="critical", queue=queue, cause=cause, fix=fix, last_error=error
    )


def _behind(view: TaskDescriptor) -> str:
    if not view.missed or view.last_fired is None:
        return ""
    count = f"at least {view.missed}" if view.missed >= MISSED_COUNTED else str(view.missed)
    return (
        f"; {count} occurrence(s) due since its last fired one ({view.last_fired.local}) have "
        "not fired"
    )


def _not_scheduled(scope: Scope, task: KnownTask, view: TaskDescriptor) -> Finding:
    window = STALE_AFTER_MS // 1000
    if task.declared_live:
        why = (
            "live workers declare it, but none of them runs the cron scheduler (each was "
            "started with scheduler=False)"
        )
    elif task.source == "registry":
        why = (
            f"it is declared in {task.module} here, but no live worker has published it in the "
            f"last {window} s (a worker publishes its tasks with its jobs every 20 s)"
        )
    else:
        apps = ",".join(task.apps) or task.module
        why = (
            f"the worker that published it (--app {apps}) has not for {window} s or more, and no "
            "live worker declares it now"
        )
    cause = (
        f"{_named(task)} is fired by no scheduler: {why}{_behind(view)}. Only a worker that "
        "declares a task fires it: start one with the module that declares it"
    )
    return Finding(
        code=NOT_SCHEDULED,
        severity="critical" if view.missed >= OVERDUE_AFTER else "warning",
        cause=cause,
        fix=worker_command(scope),
    ).sized(view.missed)


def _overdue(scope: Scope, task: KnownTask, view: TaskDescriptor) -> Finding:
    catching_up = (
        f", catching up at most {task.max_catch_up} a round (catch_up 'all')"
        if task.catch_up == "all"
        else ""
    )
    declares = "A live worker declares it" if view.scheduled else "It is declared"
    cause = (
        f"{_named(task)} is behind its schedule{_behind(view)}{catching_up}. {declares}, yet no "
        "scheduler has fired them: its worker runs without a scheduler, or the one holding the "
        "task's lease is stuck (its log says why); a worker started anew takes the lease over"
    )
    return Finding(code=OVERDUE, severity="warning", cause=cause, fix=worker_command(scope)).sized(
        view.missed
    )


def _jobs_dead(scope: Scope, task: KnownTask, dead: TaskDeadRuns) -> Finding:
    failed = f" with {dead.error_code}" if dead.error_code else ""
    cause = (
        f"{_named(task)} fires, but the job its last fired occurrence enqueued died: job "
        f'{dead.job_id} ("{dead.job}", queue {dead.queue}) used every attempt{failed}; '
        f"{dead.count} of the newest {DEAD_SCAN} dead jobs were enqueued by this task"
    )
    return Finding(
        code=JOBS_DEAD,
        severity="warning",
        queue=dead.queue,
        cause=cause,
        fix=scope.fixes.command("jobs", "show", dead.job_id, "--json"),
        next_call=NextCall(tool="inspect_job", arguments={"job_id": dead.job_id}),
        job_ids=[dead.job_id],
    ).sized(dead.count)


def _runnable(fix: str) -> bool:
    """Whether `fix` is a command line of ours (`mcp-jobs …`, `python …`), after any NAME=value
    in front of it."""
    try:
        words = shlex.split(fix)
    except ValueError:
        return False
    program = next((w for w in words if "=" not in w), "")
    return program == PROGRAM or program in PYTHONS


def _tool_call(fix: str) -> bool:
    """Whether `fix` is a tool call (`describe_jobs {"name": "tick"}`)."""
    tool, _, arguments = fix.partition(" ")
    if not _TOOL.fullmatch(tool):
        return False
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False
