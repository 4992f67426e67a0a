"""The `rate` throttle waits on the injected clock, between batch starts, and cancellably."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker, connect
from engine.backfill import BackfillRegistry, Backfills, Pacer, interval_ms
from engine.testing.blocked import wait_all_tasks_blocked
from tests.backfill.support import Customers, RecordingClock


@pytest.fixture
def recording_clock() -> RecordingClock:
    return RecordingClock()


@pytest.fixture
async def paced_jobs(
    database_url: str, recording_clock: RecordingClock, registry: JobRegistry
) -> AsyncIterator[Jobs]:
    client = await connect(database_url, clock=recording_clock, registry=registry)
    try:
        yield client
    finally:
        await client.close()


def test_rate_is_an_interval_between_batch_starts() -> None:
    assert interval_ms(None) == 0
    assert interval_ms(2) == 500
    assert interval_ms(3) == 334  # rounded up: never faster than declared
    clock = ManualClock()
    pacer = Pacer(4, clock)
    assert pacer.wait_ms(None) == 0
    assert pacer.wait_ms(clock.now_ms()) == 250
    assert pacer.wait_ms(clock.now_ms() - 100) == 150
    assert pacer.wait_ms(clock.now_ms() - 1_000) == 0  # a replayed batch from long ago


async def test_batches_are_spaced_by_the_rate_on_the_injected_clock(
    paced_jobs: Jobs,
    recording_clock: RecordingClock,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    customers.declare(backfill_registry, batch_size=10, rate=2)  # 500 ms apart
    service = Backfills(paced_jobs, registry=backfill_registry, environment="development")
    start = await service.write("normalize_emails")
    batches = customers.batches(10)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(Worker(paced_jobs).run_until_idle)
            for done in range(1, len(batches) + 1):
                # Batch `done` has run and the pass now waits 500 ms of clock time, no less.
                await recording_clock.wait_for_sleep(500)
                assert customers.handled == batches[:done]
                recording_clock.advance(499)
                await wait_all_tasks_blocked()
                assert customers.handled == batches[:done]
                recording_clock.advance(1)
            # The last wait precedes the read that finds the source empty.

    assert (await paced_jobs.get(start.job_id)).state == "done"
    assert customers.handled == batches


async def test_a_throttled_pass_stops_at_once_when_cancelled(
    paced_jobs: Jobs,
    recording_clock: RecordingClock,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    customers.declare(backfill_registry, batch_size=10, rate=0.001)  # 1000 s apart
    service = Backfills(paced_jobs, registry=backfill_registry, environment="development")
    start = await service.write("normalize_emails")
    worker = Worker(paced_jobs, lease_ms=30_000)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run_until_idle)
            await recording_clock.wait_for_sleep(1_000_000)
            await paced_jobs.cancel(start.job_id, actor="test")
            # The next heartbeat (lease/3 of clock time) sees the cancel and stops the wait,
            # long before the throttle's 1000 s are up.
            recording_clock.advance(10_000)

    assert (await paced_jobs.get(start.job_id)).state == "cancelled"
    assert customers.handled == customers.batches(10)[:1]
    (run,) = await paced_jobs.driver.backfill_runs("normalize_emails")
    assert run.status == "failed" and run.error is not None
    assert run.error.startswith("JOB_CANCELLED") and run.rows_processed == 10
