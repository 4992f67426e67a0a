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


def held_by_pause(state: JobState, run_at: int | None, now: int) -> bool:
    """Whether a pause is what keeps a job in `state` from starting now: it is due and not
    running. A running job finishes under a pause (engine/pauses.py); a delayed job, or one
    waiting for its event or its sleep, waits for its time first, and resuming would not move
    it (the notice's next_call would lift an operator's pause for nothing)."""
    if state == "ready":
        return True
    return state in ("delayed", "suspended") and run_at is not None and run_at <= now


async def pauses_for(scope: Scope, held: bool) -> list[Pause]:
    """The pauses in force, as `diagnose_queue` reads them, for a job a pause may be holding
    (`held_by_pause`); else none, and nothing is read."""
    return await pauses_in_force(scope) if held else []


def held_notices(
    scope: Scope,
    pauses: Sequence[Pause],
    queue: str,
    name: str,
    job_ids: Sequence[str],
) -> list[Finding]:
    """QUEUE_PAUSED when `queue` is paused, JOB_PAUSED when job `name` is (each a warning whose
    fix resumes it), for jobs `job_ids` that a pause holds. `pauses` are those in force
    (`pauses_for`), read once by the caller; none for a job no pause holds."""
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


__all__ = ["JOB_PAUSED", "QUEUE_PAUSED", "held_by_pause", "held_notices", "pauses_for"]
