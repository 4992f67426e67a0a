"""Reading an earlier run of a rerun job (engine/reruns.py) through `inspect_job run_id=...`.

A previous run's steps come as one page, the newest `steps_limit` of them (steps_total says how
many it holds); a rerun's runs are the same job's few steps, so they carry no cursor of their
own. The job's events are one log across runs, paged as before. A run id this job never had is
RUN_NOT_FOUND naming the job's runs (`Jobs.run_steps`, the rule's home).
"""

from __future__ import annotations

from engine.errors import LEFT_OUT, InvalidArgumentError
from mcp_jobs.operations.scope import Scope
from schemas.trace import JobTrace


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
    RUN_NOT_FOUND (from `Jobs.run_steps`) when the job never had that run."""
    steps = await scope.jobs.run_steps(trace.job.id, run_id, tenant_id=scope.tenant(None))
    return trace.model_copy(
        update={"steps": steps[-steps_limit:], "steps_total": len(steps), "steps_cursor": None}
    )
