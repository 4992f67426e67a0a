"""`jobs describe` / `describe_jobs` of a misspelt cron task's name is JOB_UNKNOWN that names the
task meant (and lists the tasks), so its fix describes that task, not every job."""

from __future__ import annotations

import pytest

from engine import JobRegistry, Jobs
from engine.errors import JobsError
from engine.tasks import task
from mcp_jobs.config import Settings
from mcp_jobs.operations.jobs import describe_jobs
from mcp_jobs.operations.scope import Scope
from tests.tasks.test_task_failing import declare_tick


@pytest.mark.drivers("memory", reason="the answer reads the registry, not the store")
async def test_a_misspelt_task_name_is_meant_as_the_task(jobs: Jobs, registry: JobRegistry) -> None:
    tick = declare_tick(registry)
    task(
        name="nightly-import",
        cron="0 3 * * *",
        tz="UTC",
        enqueue=lambda at: [(tick, {"when": at})],
        registry=registry,
    )
    scope = Scope(jobs, Settings(database_url="memory://"), "describe_jobs", "test")
    with pytest.raises(JobsError) as caught:
        await describe_jobs(scope, "nightly-imprt")
    error = caught.value
    assert error.code == "JOB_UNKNOWN"
    assert error.details is not None and error.details.get("meant") == "nightly-import"
    assert "nightly-import" in error.cause
