"""An answer about one job that a pause holds says so: `enqueue_job` (and `jobs enqueue`), and a
`wait_for_job` that timed out. Without it, an agent whose job sat behind a paused queue saw
`ready` or `settled: false` and no reason; only `diagnose_queue` named the pause.

The pauses are read where `diagnose_queue` reads them (`pauses_in_force`), and the finding says
what its `QUEUE_PAUSED` / `JOB_PAUSED` says: who paused it, when, why, and the resume line.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp_jobs.operations.models import Finding
from mcp_jobs.operations.pauses import (
    paused_since,
    pauses_in_force,
    resume_call,
    resume_command,
)
from mcp_jobs.operations.scope import Scope
from schemas.pauses import Pause
from schemas.states import JobState

QUEUE_PAUSED = "QUEUE_PAUSED"
JOB_PAUSED = "JOB_PAUSED"
# Live and not running: its next attempt starts with a claim, which a pause withholds. A running
# job finishes under a pause (engine/pauses.py), so a pause is not why it has not settled.
HELD_STATES: frozenset[JobState] = frozenset({"ready", "delayed", "suspended"})


async def pauses_for(scope: Scope, state: JobState) -> list[Pause]:
    """The pauses in force, as `diagnose_queue` reads them, when a job in `state` is one a pause
    can hold; else none, and nothing is read."""
    return await pauses_in_force(scope) if state in HELD_STATES else []


def held_notices(
    scope: Scope,
    pauses: Sequence[Pause],
    queue: str,
    name: str,
    state: JobState,
    job_ids: Sequence[str],
) -> list[Finding]:
    """QUEUE_PAUSED when `queue` is paused, JOB_PAUSED when job `name` is (each a warning whose
    fix resumes it), for jobs `job_ids` in `state`; none for a job a pause does not hold.
    `pauses` are those in force (`pauses_for`), read once by the caller."""
    if state not in HELD_STATES:
        return []
    now = scope.jobs.clock.now_ms()
    what = f"job {', '.join(job_ids)}"
    out: list[Finding] = []
    for pause in pauses:
        if (pause.kind, pause.name) not in (("queue", queue), ("job", name)):
            continue
        held = f"queue {queue}" if pause.kind == "queue" else f'job "{name}"'
        out.append(
            Finding(
                code=QUEUE_PAUSED if pause.kind == "queue" else JOB_PAUSED,
                severity="warning",
                queue=queue,
                cause=f"{held} was paused {paused_since(pause, now)}: {what} is not claimed "
                "until it is resumed",
                fix=resume_command(scope, pause),
                next_call=resume_call(pause),
                job_ids=list(job_ids),
            )
        )
    return out


__all__ = ["HELD_STATES", "JOB_PAUSED", "QUEUE_PAUSED", "held_notices", "pauses_for"]
