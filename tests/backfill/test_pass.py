"""The pass on every driver: sweeps every row once, resumes after the last completed batch, fails
with the handler's own error, refuses a stalled sweep, and keeps its ledger row honest."""

from __future__ import annotations

import anyio
import pytest

from engine import Jobs, ManualClock, Worker
from engine.backfill import BackfillRegistry, Backfills
from tests.backfill.support import Customers, flatten


async def _settle_retries(jobs: Jobs, clock: ManualClock, job_id: str, rounds: int = 10) -> None:
    """Run the pass, moving the clock to each retry's due time, until it settles."""
    worker = Worker(jobs)
    for _ in range(rounds):
        await worker.run_until_idle()
        record = await jobs.get(job_id)
        if record.state not in ("ready", "delayed"):
            return
        clock.set(record.run_at)
    raise AssertionError(f"pass {job_id} did not settle in {rounds} rounds")


async def test_a_write_sweeps_every_row_exactly_once(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    definition = customers.declare(backfill_registry, batch_size=10)
    start = await backfills.write("normalize_emails", actor="test")

    assert await Worker(jobs).run_until_idle() == 1

    handled = flatten(customers.handled)
    assert sorted(handled) == customers.dirty_ids and len(handled) == len(set(handled))
    assert customers.handled == customers.batches(10)
    assert customers.remaining() == 0
    record = await jobs.get(start.job_id)
    assert record.state == "done"
    assert record.enqueued_by == "test"
    assert record.output["rows_processed"] == 25 and record.output["batches"] == 3

    (run,) = await jobs.driver.backfill_runs("normalize_emails")
    assert run.run_id == start.run_id and run.job_id == start.job_id
    assert run.status == "completed" and run.environment == "development"
    assert run.checksum == definition.checksum
    assert (run.rows_processed, run.rows_total) == (25, 25)
    assert run.cursor == customers.dirty_ids[-1]
    assert run.finished_at is not None and run.error is None

    trace = await jobs.trace(start.job_id)
    assert [s.name for s in trace.steps] == [
        "start",
        "batch-1",
        "batch-2",
        "batch-3",
        "batch-4",
        "finish",
    ]
    assert all(s.status == "completed" for s in trace.steps)
    assert trace.steps[1].output["cursor"] == customers.batches(10)[0][-1]
    assert trace.steps[2].output["rows_done"] == 20


async def test_a_handler_failure_fails_the_attempt_and_the_retry_resumes_after_the_last_batch(
    jobs: Jobs,
    clock: ManualClock,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    batches = customers.batches(10)
    customers.fail_once.add(batches[2][0])  # batch 3 fails once
    start = await backfills.write("normalize_emails")

    await Worker(jobs).run_until_idle()

    record = await jobs.get(start.job_id)
    assert record.state == "delayed" and record.attempt == 1
    # The handler's own error, not a framework code: the job's retry policy applies to it.
    assert record.last_error is not None
    assert record.last_error.cause.startswith("BackfillHandleFailure:")
    (run,) = await jobs.driver.backfill_runs("normalize_emails")
    # The job is live and runs again: the row says running, with the attempt's error.
    assert run.status == "running" and run.error is not None and run.finished_at is None
    assert run.error.startswith("BackfillHandleFailure:")
    assert run.cursor == batches[1][-1] and run.rows_processed == 20
    assert customers.handled == batches[:2]

    await _settle_retries(jobs, clock, start.job_id)

    assert (await jobs.get(start.job_id)).state == "done"
    # Batches 1 and 2 were not handed over again; batch 3 was, once, and every row once in all.
    assert customers.handled == batches
    (run,) = await jobs.driver.backfill_runs("normalize_emails")  # the same run, now completed
    assert run.run_id == start.run_id and run.status == "completed" and run.rows_processed == 25


async def test_a_worker_killed_mid_batch_loses_nothing_and_repeats_no_completed_batch(
    jobs: Jobs,
    clock: ManualClock,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    batches = customers.batches(10)
    third = batches[2][0]
    customers.entered[third] = anyio.Event()
    customers.block_at[third] = anyio.Event()  # never set: this worker dies inside batch 3
    start = await backfills.write("normalize_emails")
    worker = Worker(jobs, lease_ms=30_000)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run_until_idle)
            await customers.entered[third].wait()

            # Progress is readable while the pass runs: ledger and trace agree on batch 2.
            (run,) = await jobs.driver.backfill_runs("normalize_emails")
            assert run.status == "running" and run.rows_processed == 20
            assert run.cursor == batches[1][-1] and run.rows_total == 25
            trace = await jobs.trace(start.job_id)
            assert [(s.name, s.status) for s in trace.steps] == [
                ("start", "completed"),
                ("batch-1", "completed"),
                ("batch-2", "completed"),
            ]
            tg.cancel_scope.cancel()  # the worker is cancelled mid-batch

    # Handed back unharmed (a kill would leave it to its lease): the next worker resumes it.
    assert (await jobs.get(start.job_id)).state == "ready"
    clock.advance(30_001)

    assert await Worker(jobs).run_until_idle() == 1

    assert (await jobs.get(start.job_id)).state == "done"
    assert customers.handled == batches
    (run,) = await jobs.driver.backfill_runs("normalize_emails")
    assert run.status == "completed" and run.rows_processed == 25


async def test_a_handler_that_keeps_failing_dead_letters_the_pass_with_its_own_error(
    jobs: Jobs,
    clock: ManualClock,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    customers.always_fail = True
    start = await backfills.write("normalize_emails")

    await _settle_retries(jobs, clock, start.job_id)

    record = await jobs.get(start.job_id)
    assert record.state == "dead" and record.attempt == record.max_attempts
    assert record.last_error is not None
    assert record.last_error.cause.startswith("BackfillHandleFailure:")
    (run,) = await jobs.driver.backfill_runs("normalize_emails")
    assert run.status == "failed" and run.rows_processed == 0 and run.cursor is None
    assert run.error is not None and run.error.startswith("BackfillHandleFailure:")
    assert customers.remaining() == 25


async def test_a_sweep_whose_source_runs_dry_while_count_matches_fails_stalled(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    customers.read_max_id = 20  # read() narrows, count() does not
    start = await backfills.write("normalize_emails")

    await Worker(jobs).run_until_idle()

    record = await jobs.get(start.job_id)
    # Terminal: an authoring bug is not retried into a dead letter.
    assert record.state == "failed" and record.attempt == 1
    assert record.last_error is not None and record.last_error.code == "BACKFILL_STALLED"
    (run,) = await jobs.driver.backfill_runs("normalize_emails")
    assert run.status == "failed" and run.error is not None
    assert run.error.startswith("BACKFILL_STALLED")
    swept = [i for i in customers.dirty_ids if i <= 20]
    assert run.rows_processed == len(swept) and run.cursor == swept[-1]
    assert customers.remaining() == 25 - len(swept)
    # A failed pass is not an applied one: the next write is allowed without --force.
    customers.read_max_id = None
    again = await backfills.write("normalize_emails")
    await Worker(jobs).run_until_idle()
    assert (await jobs.get(again.job_id)).state == "done"
    assert customers.remaining() == 0


async def test_a_read_that_ignores_its_cursor_fails_instead_of_looping(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    from engine.backfill import backfill

    async def read_from_start(after: object, limit: int) -> list[dict[str, object]]:
        return await customers.read(None, limit)

    async def handle_nothing(rows: list[object]) -> None:
        customers.handled.append([0])

    backfill(
        name="broken_paging",
        count=customers.count,
        read=read_from_start,
        key=lambda row: row["id"],
        handle=handle_nothing,
        batch_size=10,
        registry=backfill_registry,
    )
    start = await backfills.write("broken_paging")

    await Worker(jobs).run_until_idle()

    record = await jobs.get(start.job_id)
    assert record.state == "failed"
    assert record.last_error is not None
    assert record.last_error.code == "BACKFILL_DECLARATION_INVALID"
    assert customers.handled == [[0]]  # the first batch, once; the repeat was refused


async def test_a_forced_rerun_writes_a_new_ledger_row_and_never_edits_the_old_one(
    jobs: Jobs,
    clock: ManualClock,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    first = await backfills.write("normalize_emails")
    await Worker(jobs).run_until_idle()
    (old,) = await jobs.driver.backfill_runs("normalize_emails")
    clock.advance(60_000)

    again = await backfills.write("normalize_emails", force=True)
    await Worker(jobs).run_until_idle()

    assert again.run_id != first.run_id and again.job_id != first.job_id
    runs = await jobs.driver.backfill_runs("normalize_emails")
    assert [r.run_id for r in runs] == [again.run_id, first.run_id]  # newest first
    assert runs[1] == old
    assert runs[0].status == "completed" and runs[0].rows_processed == 0
    assert runs[0].started_at == old.started_at + 60_000


@pytest.mark.parametrize("environment", ["staging", "production"])
async def test_the_ledger_row_records_the_environment_and_app_version(
    jobs: Jobs,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    environment: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_JOBS_ENV", environment)
    monkeypatch.setenv("MCP_JOBS_APP_VERSION", "shop@1.4.2")
    customers.declare(backfill_registry)
    service = Backfills(jobs, registry=backfill_registry)
    assert service.environment == environment
    await service.write("normalize_emails")
    await Worker(jobs).run_until_idle()

    (run,) = await jobs.driver.backfill_runs("normalize_emails", environment)
    assert run.environment == environment and run.app_version == "shop@1.4.2"
    other = "production" if environment == "staging" else "staging"
    assert await jobs.driver.backfill_runs("normalize_emails", other) == []
