"""`pause_queue`, `resume_queue` and the pauses in force (engine/pauses.py).

A pause is global: it holds a queue or a job name for every tenant, so a tenant-pinned server or
CLI (`--tenant`) is refused with TENANT_SCOPE_EXCEEDED rather than stopping other tenants' work.
The refusal's fix is the same command without the pin, for an operator who may act on all.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from engine.drivers.base import PAUSES
from engine.errors import NOTHING_NEAR, InvalidArgumentError, JobsError
from engine.pauses import PauseKey, target, written
from mcp_jobs.operations.known import unknown_filter
from mcp_jobs.operations.models import Envelope, Finding, PauseView, QueueStatsView
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.task_names import paused_task_notice
from schemas.descriptor import JobDescriptor
from schemas.errors import NextCall
from schemas.pauses import Pause, PauseKind

# Job ids a JOB_PAUSED finding lists at most (as diagnose's other findings).
SAMPLE_IDS = 5


class PauseQueueResult(Envelope):
    pause: PauseView | None = Field(
        default=None, description="the pause in force; the first one when already_paused"
    )
    already_paused: bool | None = Field(
        default=None, description="true when it was paused before this call: nothing changed"
    )
    resume: str | None = Field(default=None, description="the command that lifts it")
    resume_call: NextCall | None = Field(
        default=None, description="the resume_queue call that lifts it"
    )
    notices: list[Finding] | None = Field(
        default=None,
        description="JOB_UNKNOWN / QUEUE_UNKNOWN: nothing uses the name (a typo?)",
    )


class ResumeQueueResult(Envelope):
    was_paused: bool | None = Field(
        default=None, description="false when nothing was paused: nothing changed"
    )
    pause: PauseView | None = Field(default=None, description="the pause lifted")
    notices: list[Finding] | None = Field(
        default=None, description="JOB_UNKNOWN / QUEUE_UNKNOWN: nothing uses the name"
    )


class PausesResult(Envelope):
    pauses: list[PauseView] | None = Field(default=None, description="every pause in force")


def command_words(action: str, kind: PauseKind, name: str) -> list[str]:
    """`queues pause|resume ...` naming `(kind, name)`, as the CLI takes it."""
    return ["queues", action, name] if kind == "queue" else ["queues", action, "--job", name]


def resume_command(scope: Scope, pause: Pause) -> str:
    return scope.fixes.command(*command_words("resume", pause.kind, pause.name))


def resume_call(pause: Pause) -> NextCall:
    """`resume_command` as the tool call an MCP client makes instead."""
    return NextCall(tool="resume_queue", arguments={pause.kind: pause.name})


# What a pause may name, listed: the fix of a call that names nothing a pause can hold.
_LISTED = {
    "queue": (("jobs", "stats"), NextCall(tool="queue_stats", arguments={})),
    "job": (("jobs", "describe"), NextCall(tool="describe_jobs", arguments={})),
}


def _listing(scope: Scope, exc: InvalidArgumentError) -> InvalidArgumentError:
    """`exc` with the listing of what its argument may name as its fix."""
    words, call = _LISTED[exc.argument]
    fix = scope.fixes.command(*words, "--json")
    return exc.mended(fix, call)


def _named(scope: Scope, queue: str | None, job: str | None) -> PauseKey:
    """`target`, whose refusal of a call naming neither carries one that runs: the queue
    stats, which name every queue. (Naming both, the call is mended by leaving `job` out.)"""
    try:
        return target(queue, job)
    except InvalidArgumentError as exc:
        if queue is not None or job is not None:
            raise
        raise _listing(scope, exc) from None


def _unpinned(scope: Scope, action: str, kind: PauseKind, name: str) -> None:
    scope.across_tenants(
        f"{action} of {kind} {name!r}",
        lambda: scope.fixes.command(*command_words(action, kind, name), "--json"),
    )


async def pause_queue(
    scope: Scope, queue: str | None = None, job: str | None = None, reason: str | None = None
) -> PauseQueueResult:
    kind, name = _named(scope, queue, job)
    try:
        # The pause's own rule first: a pinned caller is refused below with an operator's
        # command naming this pause, which must be one a pause takes.
        written(queue, job, scope.actor, reason)
        _unpinned(scope, "pause", kind, name)
        found, before = await scope.jobs.pause(
            queue=queue, job=job, actor=scope.actor, reason=reason
        )
    except InvalidArgumentError as exc:
        # A name with nothing near it that a pause may hold ('*', every queue to a worker,
        # which holds none; '-'): the fix lists those there are. Else each face mends the call.
        if exc.nearest is not NOTHING_NEAR or exc.argument not in _LISTED:
            raise
        raise _listing(scope, exc) from None
    # Held for jobs to come all the same (a queue may be paused before its first job), but a
    # name nothing uses is more often a typo that leaves the intended work running.
    unknown = await unknown_filter(scope, job, queue, None)
    notice = None if unknown is None else _holds_nothing(scope, found, unknown)
    if notice is not None and job is not None:
        notice = await paused_task_notice(scope, job, notice)  # a task's name, not a job's?
    return PauseQueueResult(
        ok=True,
        pause=PauseView.model_validate(found),
        already_paused=before,
        resume=resume_command(scope, found),
        resume_call=resume_call(found),
        notices=[notice] if notice is not None else None,
    )


def _holds_nothing(scope: Scope, pause: Pause, unknown: JobsError) -> Finding:
    return Finding(
        code=unknown.code,
        severity="warning",
        queue=pause.name if pause.kind == "queue" else None,
        cause=f"{unknown.cause}: the pause holds nothing now, only such jobs enqueued later",
        fix=resume_command(scope, pause),
        next_call=resume_call(pause),
    )


async def resume_queue(
    scope: Scope, queue: str | None = None, job: str | None = None
) -> ResumeQueueResult:
    kind, name = _named(scope, queue, job)
    _unpinned(scope, "resume", kind, name)
    lifted = await scope.jobs.resume(queue=queue, job=job)
    notice = None
    if lifted is None:
        # Nothing lifted and nothing uses the name: a typo, which left the paused one paused.
        paused = [p.name for p in await pauses_in_force(scope) if p.kind == kind]
        unknown = await unknown_filter(scope, job, queue, None, paused=paused)
        notice = None if unknown is None else _lifts_nothing(scope, queue, unknown)
    return ResumeQueueResult(
        ok=True,
        was_paused=lifted is not None,
        pause=None if lifted is None else PauseView.model_validate(lifted),
        notices=[notice] if notice is not None else None,
    )


def _lifts_nothing(scope: Scope, queue: str | None, unknown: JobsError) -> Finding:
    """The resume of a name nothing uses or holds answers was_paused false all the same (the
    resume is idempotent: run twice, a typo's resume must not fail the second time). The notice
    names the one meant and the pauses in force; its fix lists them: a resume of another name
    would lift a pause someone may have made on purpose, so none is offered."""
    return Finding(
        code=unknown.code,
        severity="warning",
        queue=queue,
        cause=f"{unknown.cause}: nothing was paused under it, so nothing changed",
        fix=scope.fixes.command("queues", "ls", "--json"),
        next_call=NextCall(tool="queue_stats", arguments={}),
    )


async def list_pauses(scope: Scope) -> PausesResult:
    # Reading them is harmless under a pin: a tenant sees why its work waits.
    found = await pauses_in_force(scope)
    return PausesResult(ok=True, pauses=[PauseView.model_validate(p) for p in found])


async def pauses_in_force(scope: Scope) -> list[Pause]:
    """Every pause in force; none on a driver that keeps no pauses (it cannot hold any)."""
    if not PAUSES.offered_by(scope.jobs.driver):
        return []
    return await scope.jobs.pauses()


def paused_since(pause: Pause, now: int) -> str:
    who = f"by {pause.paused_by} " if pause.paused_by else ""
    why = f" ({pause.reason})" if pause.reason else ""
    if pause.paused_at is None:
        return f"{who}at a time that cannot be read{why}"
    return f"{who}{(now - pause.paused_at) // 1000} s ago{why}"


async def pause_findings(
    scope: Scope, stats: Sequence[QueueStatsView], paused_jobs: Sequence[Pause], queue: str | None
) -> list[Finding]:
    """QUEUE_PAUSED / JOB_PAUSED for `diagnose_queue`: a warning while ready work waits behind
    the pause, else info (nothing is held yet). The fix lifts it."""
    now = scope.jobs.clock.now_ms()
    tenant = scope.tenant(None)
    out: list[Finding] = []
    for s in stats:
        if s.paused is None:
            continue
        held = (
            await scope.jobs.list(state="ready", queue=s.queue, tenant_id=tenant, limit=SAMPLE_IDS)
            if s.ready
            else None
        )
        out.append(
            Finding(
                code="QUEUE_PAUSED",
                severity="warning" if s.ready else "info",
                queue=s.queue,
                cause=f"queue {s.queue} was paused {paused_since(s.paused, now)}: its {s.ready} "
                "ready job(s) are not claimed until it is resumed",
                fix=resume_command(scope, s.paused),
                next_call=resume_call(s.paused),
                job_ids=[j.id for j in held.jobs] if held else [],
            )
        )
    described = await scope.jobs.describe() if queue and paused_jobs else []
    declared = {d.name: d.queue for d in described}
    for pause in paused_jobs:
        page = await scope.jobs.list(
            state="ready", name=pause.name, queue=queue, tenant_id=tenant, limit=SAMPLE_IDS
        )
        waiting = [j.id for j in page.jobs]
        if queue and not waiting and not await _job_in_queue(scope, pause.name, queue, declared):
            continue  # a pause of another queue's job (or of a name nothing uses) holds none here
        out.append(
            Finding(
                code="JOB_PAUSED",
                severity="warning" if waiting else "info",
                queue=queue,
                cause=f'job "{pause.name}" was paused {paused_since(pause, now)}: its ready jobs'
                + (" (these, and maybe more)" if waiting else "")
                + " are not claimed until it is resumed",
                fix=resume_command(scope, pause),
                next_call=resume_call(pause),
                job_ids=waiting,
            )
        )
    return out


async def _job_in_queue(scope: Scope, name: str, queue: str, declared: dict[str, str]) -> bool:
    """Whether job `name` belongs to `queue`: declared there, or any row of it stored there."""
    if declared.get(name) == queue:
        return True
    page = await scope.jobs.list(name=name, queue=queue, tenant_id=scope.tenant(None), limit=1)
    return bool(page.jobs)


def holding(pauses: Sequence[Pause], described: Sequence[JobDescriptor]) -> list[Pause]:
    """The pauses that hold any of the `described` jobs: by its name or by its queue."""
    names = {d.name for d in described}
    queues = {d.queue for d in described}
    return [p for p in pauses if (p.name in names if p.kind == "job" else p.name in queues)]
