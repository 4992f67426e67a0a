"""The event waits of suspended jobs (`ctx.step.wait_for_event`), read from their steps: what
diagnose_queue reports as EVENTS_AWAITED and send_event names when it woke no job.

A wait is a step of the job's run (status "waiting", its event, key and tenant in the output),
read with the steps every driver keeps. No driver lists its waiters, so a bounded number of
suspended jobs is read, each with one steps read, all at once: a sleep parks a job the same way
and is told apart only by its step.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.drivers.base import EVENTS
from engine.errors import JobsError
from engine.meant import meant_note
from mcp_jobs.operations.models import Finding
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.together import each
from schemas.errors import NextCall
from schemas.jobs import JobRecord
from schemas.steps import StepRecord

# Suspended jobs whose steps are read, per queue (diagnose) or per send: the findings say
# "at least" past it.
EVENT_SCAN = 20
# Waits a cause names, and job ids a finding lists, at most.
SHOWN = 5


@dataclass(frozen=True)
class EventWait:
    job_id: str
    queue: str
    event: str
    key: str
    tenant_id: str | None
    since: int


async def event_waits(scope: Scope, suspended: Sequence[JobRecord]) -> list[EventWait]:
    """The waits among the first EVENT_SCAN of `suspended`, the longest waiting first; none on
    a driver that keeps no events (no job can wait for one there)."""
    if not EVENTS.offered_by(scope.jobs.driver):
        return []
    read = list(suspended[:EVENT_SCAN])
    runs = await each(_steps(scope, job) for job in read)
    waits = [
        EventWait(
            job.id, job.queue, str(out["event"]), str(out["key"]), job.tenant_id, step.started_at
        )
        for job, steps in zip(read, runs, strict=True)
        for step in steps
        if step.status == "waiting" and isinstance(out := step.output, dict) and "event" in out
    ]
    return sorted(waits, key=lambda w: w.since)


async def _steps(scope: Scope, job: JobRecord) -> list[StepRecord]:
    try:
        return await scope.jobs.driver.load_steps(job.run_id)
    except JobsError:  # a damaged row: the job's own inspect_job says so; the rest still count
        return []


def _named(waits: Sequence[EventWait]) -> str:
    # The tenant too: an event reaches only its own tenant's waits.
    pairs = list(dict.fromkeys((w.event, w.key, w.tenant_id) for w in waits))
    shown = ", ".join(
        f'"{e}" (key "{k}"' + (f", tenant {t})" if t else ")") for e, k, t in pairs[:SHOWN]
    )
    return shown + (f" and {len(pairs) - SHOWN} more" if len(pairs) > SHOWN else "")


def _send_command(
    scope: Scope, event: str, key: str, tenant: str | None, payload: Any = None
) -> str:
    # A resend carries the payload sent: without it the woken job reads an empty one.
    carried = [] if payload is None else ["--payload", json.dumps(payload, ensure_ascii=False)]
    return scope.fixes.command(
        "events", "send", event, key, *carried, *(["--tenant", tenant] if tenant else [])
    )


def awaited_finding(
    scope: Scope, queue: str, waits: Sequence[EventWait], scanned: int, now: int
) -> Finding | None:
    """EVENTS_AWAITED for `queue`: info (a wait ends by itself, at its timeout), naming what is
    awaited, how long the oldest has waited and the send that wakes it. The call offered reads
    that job: an event says something happened (a payment), which only its owner can say."""
    if not waits:
        return None
    oldest = waits[0]
    count = f"at least {len(waits)}" if scanned >= EVENT_SCAN else str(len(waits))
    return Finding(
        code="EVENTS_AWAITED",
        severity="info",
        queue=queue,
        cause=f"{count} suspended job(s) in queue {queue} wait for an event: {_named(waits)}; "
        f"the oldest has waited {(now - oldest.since) // 1000} s. Each wakes when send_event "
        "delivers its event (name, key, tenant) once it has happened, or at its timeout",
        fix=_send_command(scope, oldest.event, oldest.key, oldest.tenant_id),
        next_call=NextCall(tool="inspect_job", arguments={"job_id": oldest.job_id}),
        job_ids=[w.job_id for w in waits[:SHOWN]],
    )


async def unawaited_notice(
    scope: Scope, name: str, key: str, tenant: str | None, payload: Any = None
) -> Finding | None:
    """For a send that woke no job: EVENT_NOT_AWAITED naming the events jobs wait for, when any
    do. A warning when its name is a slip of one awaited (the fix: the send with that name and
    the same payload, shown, not offered to run); else info, since the event is kept for a wait
    to come."""
    page = await scope.jobs.list(state="suspended", tenant_id=scope.tenant(None), limit=EVENT_SCAN)
    waits = await event_waits(scope, page.jobs)
    if not waits:
        return None
    names = sorted({w.event for w in waits})
    hint, meant = ("", {}) if name in names else meant_note(name, names)
    for_tenant = f" for tenant {tenant}" if tenant else ""
    cause = (
        f'no job waits now for event "{name}" with key "{key}"{for_tenant}{hint}; jobs wait for '
        f"{_named(waits)}. The event is kept for the event window: a job that waits for it "
        "later receives it"
    )
    if meant:
        return Finding(
            code="EVENT_NOT_AWAITED",
            severity="warning",
            cause=cause,
            fix=_send_command(scope, meant["meant"], key, tenant, payload),
        )
    return Finding(
        code="EVENT_NOT_AWAITED",
        severity="info",
        cause=cause,
        fix=scope.fixes.command("jobs", "ls", "--state", "suspended", "--json"),
        next_call=NextCall(tool="list_jobs", arguments={"state": "suspended"}),
    )
