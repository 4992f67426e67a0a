"""Reading an earlier run of a rerun job (engine/reruns.py) through `inspect_job run_id=...`.

A previous run's steps come as one page, the newest `steps_limit` of them (steps_total says how
many it holds); a rerun's runs are the same job's few steps, so they carry no cursor of their
own. The job's events are one log across runs, paged as before. A run id this job never had is
RUN_NOT_FOUND naming the job's runs, which its `requeued` events record: every earlier run
holds at least the step it was rerun from, so a run id with no steps is none of this job's.
"""

from __future__ import annotations

from engine.errors import LEFT_OUT, InvalidArgumentError
from engine.paging import MAX_TRACE_PAGE
from mcp_jobs.errors import RunNotFoundError
from mcp_jobs.operations.scope import Scope
from schemas.jobs import JobRecord
from schemas.trace import JobTrace

# Pages of events read, at most, to name a job's runs (a refusal's, so bounded, not exact for a
# job with more events than that).
RUNS_PAGES = 20


def refuse_run_cursor(steps_cursor: str | None) -> None:
    """With `run_id`, steps come as one page: a steps cursor has nothing to continue."""
    if steps_cursor is not None:
        raise InvalidArgumentError(
            "steps_cursor",
            steps_cursor,
            "omitted with run_id (a run's steps are one page)",
            nearest=LEFT_OUT,
        )


async def run_trace(scope: Scope, trace: JobTrace, run_id: str, steps_limit: int) -> JobTrace:
    """`trace` with the steps of `run_id`, an earlier run of the same job (tenant-pinned);
    RUN_NOT_FOUND when the job never had that run."""
    steps = await scope.jobs.run_steps(trace.job.id, run_id, tenant_id=scope.tenant(None))
    if not steps:
        raise RunNotFoundError(trace.job.id, run_id, await job_runs(scope, trace.job))
    return trace.model_copy(
        update={"steps": steps[-steps_limit:], "steps_total": len(steps), "steps_cursor": None}
    )


async def job_runs(scope: Scope, job: JobRecord) -> list[str]:
    """The job's runs, newest first: the current one, then each one a rerun left behind, as
    the reruns' `requeued` events name them (`engine.reruns.rerun_event_data`)."""
    runs: list[object] = [job.run_id, job.rerun_of]
    cursor = None
    for _ in range(RUNS_PAGES):
        page = await scope.jobs.trace(
            job.id,
            tenant_id=scope.tenant(None),
            steps_limit=1,
            events_limit=MAX_TRACE_PAGE,
            events_cursor=cursor,
        )
        for event in reversed(page.events):  # a page is oldest first
            data = event.data or {}
            if event.kind == "requeued" and "previous_run_id" in data:
                runs += [data.get("run_id"), data["previous_run_id"]]
        cursor = page.events_cursor
        if cursor is None:
            break
    return list(dict.fromkeys(run for run in runs if isinstance(run, str)))
