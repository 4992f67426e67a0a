"""`describe_jobs` (`mcp-jobs jobs describe NAME`) given a task's name answers that task."""

from __future__ import annotations

import pytest

from engine import JobRegistry, Jobs
from engine.errors import JobsError
from engine.tasks import task
from mcp_jobs.config import Settings
from mcp_jobs.operations import describe_jobs
from mcp_jobs.operations.scope import Scope


def scope_of(jobs: Jobs) -> Scope:
    return Scope(jobs=jobs, settings=Settings(), tool="jobs describe", actor="test", face="cli")


async def test_describing_a_task_by_name_answers_the_task(
    jobs: Jobs, registry: JobRegistry
) -> None:
    task(name="every-minute", cron="* * * * *", tz="UTC", enqueue=lambda at: [], registry=registry)
    answer = await describe_jobs(scope_of(jobs), "every-minute")
    assert answer.jobs == [] and answer.tasks is not None
    assert [t.name for t in answer.tasks] == ["every-minute"]


async def test_a_name_neither_job_nor_task_is_still_job_unknown(
    jobs: Jobs, registry: JobRegistry
) -> None:
    task(name="every-minute", cron="* * * * *", tz="UTC", enqueue=lambda at: [], registry=registry)
    with pytest.raises(JobsError) as caught:
        await describe_jobs(scope_of(jobs), "every-hour")
    assert caught.value.code == "JOB_UNKNOWN"
