"""`run_backfill` with `wait_seconds` (the CLI's `backfill NAME --write --wait N` too) answers a
pass that failed with the pass's own error, and one whose attempt failed and waits for its retry
with a notice saying so and when it runs again."""

from __future__ import annotations

import anyio
import pytest

from engine import Jobs, Worker
from engine.backfill import BackfillRegistry
from engine.iso_time import iso
from mcp_jobs.config import Settings
from mcp_jobs.operations import run_backfill
from mcp_jobs.operations.backfills import BACKFILL_POLL_MS
from mcp_jobs.operations.models import RunBackfillResult
from mcp_jobs.operations.scope import Scope
from tests.backfill.support import Customers, RecordingClock


@pytest.fixture
def clock() -> RecordingClock:
    """The clock of `jobs`: one that tells when the follow waits for its next look."""
    return RecordingClock()


def _scope(jobs: Jobs, registry: BackfillRegistry) -> Scope:
    return Scope(jobs, Settings(), "run_backfill", "test", backfill_registry=registry)


async def _write_and_follow(
    jobs: Jobs, clock: RecordingClock, registry: BackfillRegistry, wait_seconds: float
) -> RunBackfillResult:
    """The write, followed while a worker runs its pass once: its answer at the next look."""
    answers: list[RunBackfillResult] = []

    async def write() -> None:
        scope = _scope(jobs, registry)
        answers.append(
            await run_backfill(scope, "normalize_emails", write=True, wait_seconds=wait_seconds)
        )

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            await clock.wait_for_sleep(BACKFILL_POLL_MS)  # written; the follow looked once
            await Worker(jobs).run_until_idle()
            clock.advance(BACKFILL_POLL_MS)
    return answers[0]


async def test_a_followed_pass_that_fails_answers_its_own_error(
    jobs: Jobs, clock: RecordingClock, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    customers.read_max_id = 20  # the pass fails BACKFILL_STALLED, not retried

    answer = await _write_and_follow(jobs, clock, backfill_registry, 30)

    assert not answer.ok and answer.error is not None
    assert answer.error.code == "BACKFILL_STALLED" and not answer.error.retryable
    assert answer.error.fix.startswith("make count() select exactly")
    (job,) = (await jobs.list(name="backfill.pass")).jobs
    (run,) = await jobs.driver.backfill_runs("normalize_emails")
    assert job.id in answer.error.cause and run.run_id in answer.error.cause
    assert answer.error.details is not None
    assert answer.error.details["job_id"] == job.id and answer.error.details["state"] == "failed"


async def test_a_followed_pass_waiting_for_its_retry_says_when_it_runs_again(
    jobs: Jobs, clock: RecordingClock, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    customers.fail_once.add(customers.batches(10)[1][0])

    # The retry (30 s after the failure) falls after the wait: the answer comes at once.
    answer = await _write_and_follow(jobs, clock, backfill_registry, 20)

    assert answer.ok and answer.settled is False
    assert answer.run is not None and answer.run.status == "running"
    job = await jobs.get(answer.start.job_id if answer.start else "")
    assert job.state == "delayed"
    (notice,) = [n for n in answer.notices or [] if n.code == "RETRIES_WAITING"]
    assert notice.severity == "warning"
    assert notice.cause.startswith("attempt 1 of 5 of the pass failed: BackfillHandleFailure:")
    assert f"retry at {iso(job.run_at)}" in notice.cause
    assert notice.job_ids == [job.id]


async def test_a_followed_pass_that_completes_answers_as_before(
    jobs: Jobs, clock: RecordingClock, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry, batch_size=10)

    answer = await _write_and_follow(jobs, clock, backfill_registry, 30)

    assert answer.ok and answer.settled is True and answer.notices is None
    assert answer.run is not None and answer.run.status == "completed"
