"""An operator's cancel of a running pass settles its ledger row with the rows really handled, and
the pass starts no batch after it: whether the cancel lands while a batch's `handle` runs (its
step write is then refused) or between two batches."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from engine import JobRegistry, Jobs, Worker, connect
from engine.backfill import BackfillRegistry, Backfills
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


async def test_a_cancel_during_a_batch_settles_the_row_with_that_batch_counted(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    batches = customers.batches(10)
    second = batches[1][0]
    customers.entered[second] = anyio.Event()
    customers.block_at[second] = anyio.Event()
    release = customers.block_at[second]
    start = await backfills.write("normalize_emails")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(Worker(jobs, lease_ms=30_000).run_until_idle)
            await customers.entered[second].wait()
            await jobs.cancel(start.job_id, actor="test")
            release.set()  # batch 2's handle finishes after the cancel; its step is refused

    assert (await jobs.get(start.job_id)).state == "cancelled"
    assert customers.handled == batches[:2]  # no batch started after the cancel
    (run,) = await jobs.driver.backfill_runs("normalize_emails")
    assert run.status == "failed" and run.finished_at is not None
    assert run.error is not None and run.error.startswith("JOB_CANCELLED")
    # Batch 2 was handled, so it is counted, though its step was never recorded.
    assert run.rows_processed == 20 and run.cursor == batches[1][-1]


async def test_a_cancel_between_batches_stops_the_pass_before_the_next_one(
    paced_jobs: Jobs,
    recording_clock: RecordingClock,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    customers.declare(backfill_registry, batch_size=10, rate=1)  # 1 s apart
    service = Backfills(paced_jobs, registry=backfill_registry, environment="development")
    start = await service.write("normalize_emails")
    batches = customers.batches(10)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(Worker(paced_jobs, lease_ms=30_000).run_until_idle)
            await recording_clock.wait_for_sleep(1_000)  # batch 1 done, batch 2 waits
            await paced_jobs.cancel(start.job_id, actor="test")
            # Less than a heartbeat (10 s): the pass itself must see the cancel.
            recording_clock.advance(1_000)

    assert customers.handled == batches[:1]
    (run,) = await paced_jobs.driver.backfill_runs("normalize_emails")
    assert run.status == "failed" and run.finished_at is not None
    assert run.error is not None and run.error.startswith("JOB_CANCELLED")
    assert run.rows_processed == 10 and run.cursor == batches[0][-1]
