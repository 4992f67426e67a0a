"""Rerun from a step (#24 item 5): the transition as pure functions, no I/O.

A rerun gives a failed, dead or done job (a cancelled one when asked) a NEW run id linked to the
old one (`rerun_of`). The completed steps that come before the named step, in the old run's
order (started_at, then insertion), are copied into the new run with their stored results, so
they replay without running; the named step and every step after it run again. The old run's
steps stay stored, readable by run id.

The named step must be a stored step of the run (it may be the one that failed). Every step
before it must have completed: a rerun point after a step that did not complete would have to run
that earlier step again, which is not what "from this step" says, so it is refused
(STEP_NOT_RERUNNABLE, whose fix names the first step that did not complete).

Every driver computes the outcome with `plan_rerun` inside its own transaction (the memory
driver under its lock, the SQL drivers after locking the job row), so they agree by
construction; the kit's test_reruns.py pins it. Redis transcribes it into one script
(engine/drivers/redis/rerun_script.py), pinned by tests/redis/test_rerun_agreement.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import (
    JobNotRetryableError,
    JobsError,
    RerunStepUnknownError,
    RerunStepUnreachedError,
    short_repr,
)
from engine.rules import retry_transition
from engine.shell_words import shell_join
from schemas.errors import NextCall
from schemas.jobs import JobRecord
from schemas.states import JobState
from schemas.steps import StepRecord

__all__ = [
    "RERUNNABLE_STATES",
    "RerunPlan",
    "RunNotFoundError",
    "can_rerun",
    "plan_rerun",
    "rerun_event_data",
]

# Done joins failed and dead: rerunning finished work from a step is the point (DBOS's fork).
RERUNNABLE_STATES: tuple[JobState, ...] = ("failed", "dead", "done")


def can_rerun(state: JobState, include_cancelled: bool) -> bool:
    """Failed, dead and done jobs rerun; a cancelled one only when asked (rule 11)."""
    return state in RERUNNABLE_STATES or (include_cancelled and state == "cancelled")


@dataclass(frozen=True)
class RerunPlan:
    """What a rerun writes: the job row, the steps copied into the new run (in run order), and
    the data of its `requeued` event."""

    record: JobRecord
    copied: list[StepRecord]
    event_data: dict[str, Any]


def rerun_event_data(
    previous: JobState, from_step: str, old_run: str, new_run: str
) -> dict[str, Any]:
    """The `requeued` event of a rerun: the retry's `from` plus where and from which run."""
    return {"from": previous, "from_step": from_step, "previous_run_id": old_run, "run_id": new_run}


def plan_rerun(
    job: JobRecord,
    steps: Sequence[StepRecord],
    from_step: str,
    include_cancelled: bool,
    new_run_id: str,
    now: int,
) -> RerunPlan:
    """The rerun of `job` from `from_step`, given its current run's `steps` in run order.
    Raises JOB_NOT_RETRYABLE (a live job, or cancelled without `include_cancelled`),
    STEP_UNKNOWN, or STEP_NOT_RERUNNABLE; the caller checks the dedupe key as retry does."""
    if not can_rerun(job.state, include_cancelled):
        raise JobNotRetryableError(job.id, job.state, rerun=True)
    names = [step.name for step in steps]
    if from_step not in names:
        raise RerunStepUnknownError(job.id, job.run_id, from_step, names)
    kept = steps[: names.index(from_step)]
    for step in kept:
        if step.status != "completed":
            raise RerunStepUnreachedError(job.id, job.run_id, from_step, step.name, step.status)
    copied = [step.model_copy(update={"run_id": new_run_id}) for step in kept]
    # A retry's row (rules.retry_transition), in a new run linked to the old, its output gone.
    record = retry_transition(job, now).model_copy(
        update={"run_id": new_run_id, "rerun_of": job.run_id, "output": None}
    )
    data = rerun_event_data(job.state, from_step, job.run_id, new_run_id)
    return RerunPlan(record=record, copied=copied, event_data=data)


class RunNotFoundError(JobsError):
    code = "RUN_NOT_FOUND"
    title = "this job has no run with this id"

    def __init__(self, job_id: str, run_id: str, runs: Sequence[str]) -> None:
        """`runs`: the job's runs, newest first (the current one first). The fix shows the run
        before the current one, the one a rerun left behind; with none, the job itself."""
        earlier = runs[1] if len(runs) > 1 else None
        arguments = {"job_id": job_id} if earlier is None else {"job_id": job_id, "run_id": earlier}
        shown = [] if earlier is None else ["--run-id", earlier]
        super().__init__(
            f"job {job_id} has no run {short_repr(run_id)}; its runs, newest first: "
            f"{', '.join(runs)}",
            shell_join(["mcp-jobs", "jobs", "show", job_id, *shown, "--json"]),
            next_call=NextCall(tool="inspect_job", arguments=arguments),
            details={"job_id": job_id, "run_id": run_id, "runs": list(runs)},
        )
