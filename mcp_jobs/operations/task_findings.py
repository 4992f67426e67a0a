"""TASK_FAILING: a cron task whose rounds do not fire, read from the failure its scheduler stored
(the scheduler runs in a worker; this runs wherever diagnose does).

A task may enqueue into any queue, so it is reported in the whole-system diagnosis, and in a
queue's own when the stored error names a job registered here in that queue (an input its
job refuses, say); a job the task names that no longer exists has no queue to be reported in.
A tenant-pinned caller sees none: a task spans every tenant, and only its declaration fixes it.
"""

from __future__ import annotations

import shlex

from engine.instants import iso
from engine.tasks import TaskDefinition, tasks_of
from mcp_jobs.fix_context import PROGRAM, PYTHONS
from mcp_jobs.operations.models import Finding
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.together import each
from schemas.errors import ErrorPayload
from schemas.scheduler import TaskFailure

CODE = "TASK_FAILING"


async def task_findings(scope: Scope, queue: str | None) -> list[Finding]:
    if scope.settings.tenant is not None:
        return []
    definitions = list(tasks_of(scope.jobs.registry))
    states = await each(scope.jobs.driver.task_state(d.name) for d in definitions)
    findings: list[Finding] = []
    for definition, state in zip(definitions, states, strict=True):
        if state is None or state.failure is None:
            continue
        target = _target_queue(scope, state.failure.error)
        if queue is None or target == queue:
            findings.append(_finding(definition, state.failure, target))
    return findings


def _target_queue(scope: Scope, error: ErrorPayload) -> str | None:
    """The queue of the job the error names, when one registered here does."""
    named = (error.details or {}).get("job")
    job = scope.jobs.registry.get(named) if isinstance(named, str) else None
    return job.queue if job is not None else None


def _finding(definition: TaskDefinition, failure: TaskFailure, queue: str | None) -> Finding:
    error = failure.error
    module = definition.declared_by.partition(":")[0] or definition.declared_by
    cause = (
        f'task "{definition.name}" (cron "{definition.cron}", {definition.tz}) has not fired since '
        f"{iso(failure.since)}: {failure.rounds} round(s) in a row failed, the latest at "
        f"{iso(failure.last_failed_at)} with {error.code}: {error.cause}. Each round tries "
        f"again; the task's declaration in {module} is what must change"
    )
    if _runnable(error.fix):
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
    fix = f'change task "{definition.name}" in {module}, then restart its workers: {error.fix}'
    return Finding(
        code=CODE, severity="critical", queue=queue, cause=cause, fix=fix, last_error=error
    )


def _runnable(fix: str) -> bool:
    """Whether `fix` is a command line of ours (`mcp-jobs …`, `python …`), after any NAME=value
    in front of it."""
    try:
        words = shlex.split(fix)
    except ValueError:
        return False
    program = next((w for w in words if "=" not in w), "")
    return program == PROGRAM or program in PYTHONS
