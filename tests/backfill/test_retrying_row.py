"""While the pass's job is live and will run again, its ledger row says `running` (with the error
of the attempt that failed), never `failed` with a finish time; once the job settles without the
pass writing it (cancelled while it waits for its retry), readers show the row as failed."""

from __future__ import annotations

from engine import Jobs, ManualClock, Worker
from engine.backfill import BackfillRegistry, Backfills
from engine.pruner import prune_all
from engine.retention import plan, policy_from_env
from tests.backfill.support import Customers


async def test_a_failed_attempt_that_will_be_retried_leaves_the_row_running(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    batches = customers.batches(10)
    customers.fail_once.add(batches[1][0])
    start = await backfills.write("normalize_emails")

    await Worker(jobs).run_until_idle()

    assert (await jobs.get(start.job_id)).state == "delayed"
    (run,) = await jobs.driver.backfill_runs("normalize_emails")
    assert run.status == "running" and run.finished_at is None
    assert run.error is not None and run.error.startswith("BackfillHandleFailure:")
    assert run.rows_processed == 10
    (state,) = await backfills.list()
    assert state.live_job_id == start.job_id
    assert state.last_run is not None and state.last_run.status == "running"


async def test_a_failure_with_no_attempt_left_settles_the_row_failed(
    jobs: Jobs,
    clock: ManualClock,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    customers.always_fail = True
    start = await backfills.write("normalize_emails")
    worker = Worker(jobs)
    record = await jobs.get(start.job_id)
    while record.state != "dead":
        await worker.run_until_idle()
        record = await jobs.get(start.job_id)
        (run,) = await jobs.driver.backfill_runs("normalize_emails")
        settled = record.state == "dead"
        assert run.status == ("failed" if settled else "running")
        assert (run.finished_at is not None) is settled
        clock.set(record.run_at)


async def test_a_pass_cancelled_while_it_waits_for_its_retry_reads_as_failed(
    jobs: Jobs, backfills: Backfills, backfill_registry: BackfillRegistry, customers: Customers
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    customers.fail_once.add(customers.batches(10)[1][0])
    start = await backfills.write("normalize_emails")
    await Worker(jobs).run_until_idle()

    await jobs.cancel(start.job_id, actor="test")

    page = await backfills.runs_page("normalize_emails")
    (run,) = page.runs
    assert run.status == "failed" and run.finished_at is not None
    assert run.error is not None and run.error.startswith("JOB_CANCELLED")
    (state,) = await backfills.list()
    assert state.live_job_id is None and state.pending
    assert state.last_run is not None and state.last_run.status == "failed"


async def test_a_row_whose_pass_job_was_pruned_still_reads_as_failed(
    jobs: Jobs,
    clock: ManualClock,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    """Read from its job's end, the row went back to `running` for good once retention pruned
    that job (exploreR): no pass runs it."""
    customers.declare(backfill_registry, batch_size=10)
    customers.fail_once.add(customers.batches(10)[1][0])
    start = await backfills.write("normalize_emails")
    await Worker(jobs).run_until_idle()
    await jobs.cancel(start.job_id, actor="test")
    clock.advance(1)
    await prune_all(jobs, plan(policy_from_env(environ={}), clock.now_ms(), older_than_ms=0))
    assert not (await jobs.list(name="backfill.pass")).jobs  # the pass job is gone

    (run,) = (await backfills.runs_page("normalize_emails")).runs
    assert run.status == "failed" and run.error is not None
    assert run.error.startswith("JOB_NOT_FOUND") and start.job_id in run.error
    (state,) = await backfills.list()
    assert state.live_job_id is None and state.pending
    assert state.last_run is not None and state.last_run.status == "failed"
