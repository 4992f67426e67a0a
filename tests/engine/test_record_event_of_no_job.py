"""`jobs.record_event(job_id=X)` for an id no stored job has is JOB_NOT_FOUND and stores
nothing: such an event matched no retention rule (a job's events go with its job, events of no
job are those recorded without one), so a year of them stayed for good."""

from __future__ import annotations

import pytest

from engine import JobRegistry, Jobs
from engine.errors import JobNotFoundError
from tests.support.worker_jobs import keyed_job

GHOST = "019b76daa800000052c916a3e2e10d15"


async def test_an_event_naming_no_stored_job_is_refused_and_nothing_stored(
    jobs: Jobs, registry: JobRegistry
) -> None:
    with pytest.raises(JobNotFoundError) as refused:
        await jobs.record_event("note", job_id=GHOST, actor="app")
    assert refused.value.retryable is False
    assert await jobs.driver.count_jobless_events(2**62) == 0

    stored = await jobs.enqueue(keyed_job(registry), {"n": 1})
    await jobs.record_event("note", job_id=stored.id, actor="app")
    await jobs.record_event("note", actor="app")  # of no job: pruned as such
    assert [e.kind for e in (await jobs.trace(stored.id)).events if e.kind == "note"] == ["note"]
    assert await jobs.driver.count_jobless_events(2**62) == 1
