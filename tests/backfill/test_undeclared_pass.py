"""A worker that does not declare a backfill never kills its pass: a process declaring no
backfills does not serve the backfills queue by default, and a pass naming a backfill the
worker does not declare is handed back, unharmed, for one that does (a rolling deploy)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from pydantic import BaseModel

from engine import JobContext, Jobs, ManualClock, Worker
from engine.backfill import PASS_QUEUE, BackfillRegistry, Backfills
from engine.backfill.pass_job import UNDECLARED_PATIENCE_MS
from engine.declare import JobRegistry, job
from engine.run_job import UNKNOWN_NAME_PARK_MS
from tests.backfill.support import Customers, declare


class Order(BaseModel):
    order_id: int


def _old_worker_jobs(jobs: Jobs, *, backfills: BackfillRegistry | None = None) -> Jobs:
    """Another deploy's worker on the same database: its own job registry, declaring the app's
    `ship` job and, when given, a backfill registry of its own (the pass comes with it)."""

    async def ship(input: Order, ctx: JobContext) -> None:
        return None

    registry = JobRegistry()
    job(name="ship", queue="orders", idempotency_key=lambda i: "ship", registry=registry)(ship)
    old = Jobs(jobs.driver, registry=registry, clock=jobs.clock)
    if backfills is not None:
        Backfills(old, registry=backfills, environment="development")
    return old


async def test_a_process_that_declares_no_backfill_does_not_serve_the_backfills_queue(
    jobs: Jobs,
) -> None:
    old = _old_worker_jobs(jobs, backfills=BackfillRegistry())

    assert Worker(old).queues == ["orders"]


def test_importing_the_backfill_machinery_registers_no_pass_until_a_backfill_is_declared() -> None:
    # A fresh interpreter: the default registries of this one hold other tests' declarations.
    script = textwrap.dedent(
        """
        from engine.backfill import PASS_JOB, backfill
        from engine.declare import default_registry

        async def count(): return 0
        async def read(after, limit): return []
        async def handle(rows): return None

        before = PASS_JOB in default_registry
        backfill(name="later", count=count, read=read, key=lambda r: r, handle=handle)
        print(before, PASS_JOB in default_registry)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == ["False", "True"]


async def test_a_pass_taken_by_a_worker_that_lacks_its_backfill_waits_for_one_that_has_it(
    jobs: Jobs,
    clock: ManualClock,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    """The rolling deploy: the new code declares the backfill and writes it; an old worker,
    which declares another backfill only, claims the pass first."""
    customers.declare(backfill_registry, batch_size=10)
    start = await backfills.write("normalize_emails")
    older = BackfillRegistry()
    declare(older, name="an_older_sweep")
    old = _old_worker_jobs(jobs, backfills=older)

    assert await Worker(old, queues=[PASS_QUEUE]).run_until_idle() == 1

    record = await jobs.get(start.job_id)
    # Handed back: no attempt burned, no failure, nothing swept, no ledger row.
    assert record.state == "suspended" and record.attempt == 0
    assert record.run_at == clock.now_ms() + UNKNOWN_NAME_PARK_MS
    assert customers.handled == []
    assert await jobs.driver.backfill_runs("normalize_emails") == []
    trace = await jobs.trace(start.job_id)
    assert any(e.kind == "backfill_not_declared" for e in trace.events)

    clock.advance(UNKNOWN_NAME_PARK_MS)
    assert await Worker(jobs).run_until_idle() == 1  # the new worker

    assert (await jobs.get(start.job_id)).state == "done"
    assert customers.remaining() == 0
    (run,) = await jobs.driver.backfill_runs("normalize_emails")
    assert run.run_id == start.run_id and run.status == "completed" and run.rows_processed == 25


async def test_a_worker_without_backfills_told_to_claim_the_queue_parks_the_pass(
    jobs: Jobs,
    clock: ManualClock,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    start = await backfills.write("normalize_emails")
    old = _old_worker_jobs(jobs)  # no backfill at all: the pass is a name it does not know

    assert await Worker(old, queues=[PASS_QUEUE]).run_until_idle() == 1

    record = await jobs.get(start.job_id)
    assert record.state == "suspended" and record.attempt == 0
    assert record.last_error is not None and record.last_error.code == "JOB_UNKNOWN"
    clock.advance(UNKNOWN_NAME_PARK_MS)
    assert await Worker(jobs).run_until_idle() == 1
    assert (await jobs.get(start.job_id)).state == "done"


async def test_a_pass_no_worker_declares_for_a_day_fails_with_a_ledger_row(
    jobs: Jobs,
    clock: ManualClock,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
) -> None:
    customers.declare(backfill_registry, batch_size=10)
    start = await backfills.write("normalize_emails")
    older = BackfillRegistry()
    declare(older, name="an_older_sweep")
    old = Worker(_old_worker_jobs(jobs, backfills=older), queues=[PASS_QUEUE])

    await old.run_until_idle()
    clock.advance(UNDECLARED_PATIENCE_MS)
    await old.run_until_idle()

    record = await jobs.get(start.job_id)
    assert record.state == "failed"
    assert record.last_error is not None and record.last_error.code == "BACKFILL_UNKNOWN"
    assert not record.last_error.retryable
    (run,) = await jobs.driver.backfill_runs("normalize_emails")
    assert run.run_id == start.run_id and run.status == "failed"
    assert run.error is not None and run.error.startswith("BACKFILL_UNKNOWN")
    assert run.finished_at == clock.now_ms() and customers.handled == []
