"""What a driver answers around a row of its own bookkeeping that another program wrote: a
worker's presence row and an outbox row are passed over, logged once, and the rest goes on (a
worker's next beat rewrites its row; an outbox row comes back at its lease's end); a pause
still holds by what it names and shows without its details until it is resumed; a lease is
taken over and a task's scheduler state is none (the task fires on); a rate key's TAT and a
rate reservation are none (the next take writes them anew), and so is a concurrency cap's
holder; a published descriptor is DESCRIPTOR_INVALID until the pruner forgets it; a backfill
run's row in the ledger is STORE_DAMAGED naming the run, with a fix that prints it; so is an
inbound event that a waiting job meets, which fails that job for good."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from engine import (
    Enqueue,
    JobContext,
    JobRegistry,
    Jobs,
    RateLimit,
    Retry,
    Worker,
    describe_tasks,
    job,
    task,
)
from engine.drivers.base import (
    DESCRIPTORS,
    LEADER_LEASES,
    PAUSES,
    RATES,
    SCHEDULER,
    Driver,
    require,
)
from engine.errors import JobsError
from engine.ids import new_id
from engine.pruner import Pruner
from engine.retention import DEFAULT_POLICY
from engine.tasks.scheduler import Scheduler
from engine.testing.kit.test_paging import request
from engine.testing.kit.test_worker_expiry import seen
from engine.testing.plugin import AppTransaction
from mcp_jobs import operations
from mcp_jobs.config import Settings
from mcp_jobs.operations.scope import Scope
from schemas.backfill import BackfillRun
from schemas.errors import ErrorPayload
from schemas.jobs import EnqueueRequest
from schemas.pauses import Pause

# Another program's write: the key or row of `id`, overwritten with a value the driver never
# writes.
Overwrite = Callable[[str], Awaitable[None]]
LEASE_MS = 1_000


def _damage_logged(caplog: pytest.LogCaptureFixture, named: str) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if "cannot be read" in r.getMessage() and named in r.getMessage()
    ]


async def check_presence_passes_over(
    driver: Driver, now: int, overwrite: Overwrite, caplog: pytest.LogCaptureFixture
) -> None:
    """Two workers beat; another program overwrites the second's row. The live list answers the
    first and logs the row once however often it is read; the first's beat, which on some stores
    reads every other row, goes on; the second's next beat makes it live again."""
    first, second = f"wa-{new_id()}", f"wb-{new_id()}"  # fresh names: each is logged once
    await driver.worker_seen(seen(first, now))
    await driver.worker_seen(seen(second, now))
    await overwrite(second)
    for _ in range(3):
        assert [w.id for w in await driver.live_workers(0)] == [first]
    assert len(_damage_logged(caplog, second)) == 1, caplog.text
    await driver.worker_seen(seen(first, now))
    await driver.worker_seen(seen(second, now))
    assert [w.id for w in await driver.live_workers(0)] == [first, second]


async def check_outbox_passes_over(
    driver: Driver,
    url: str,
    app_transaction: AppTransaction,
    requests: Sequence[EnqueueRequest],
    overwrite: Overwrite,
    caplog: pytest.LogCaptureFixture,
    advance: Callable[[int], None],
) -> None:
    """Two staged rows, the first (in the relay's order) overwritten: a claim hands out the
    second, which publishes; the first stays claimed and unpublished, comes back at its lease's
    end and is passed over again, logged once."""
    async with app_transaction(driver, url) as tx:
        damaged, healthy = await driver.outbox_stage(tx, requests)
    await overwrite(damaged)
    claimed = await driver.outbox_claim("relay", "t1", 10, LEASE_MS)
    assert [r.id for r in claimed] == [healthy]
    (published,) = await driver.outbox_publish("t1", claimed)
    assert published.id == requests[1].id and not published.deduped
    assert await driver.outbox_claim("relay", "t2", 10, LEASE_MS) == []  # still claimed
    advance(LEASE_MS)
    assert await driver.outbox_claim("relay", "t3", 10, LEASE_MS) == []
    assert len(_damage_logged(caplog, damaged)) == 1, caplog.text


async def check_pause_details_left_out(
    driver: Driver,
    now: int,
    overwrite: Overwrite,
    caplog: pytest.LogCaptureFixture,
    stray: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """A queue's pause whose details (who, when, why) another program overwrote: it still holds
    the queue's jobs, every read answers it without them (`paused_at` None), logged once, and
    resuming lifts it. `stray`, where the store can hold one, writes a pause of no kind this
    build writes: it holds nothing and every read passes it over."""
    pauses = require(driver, PAUSES)
    queue = f"q-{new_id()}"  # a fresh name: it is logged once
    await pauses.pause("queue", queue, "ops", "deploy", now)
    await driver.enqueue([request(1, queue=queue, run_at=now)])
    await overwrite(queue)
    if stray is not None:
        await stray()
    bare = Pause(kind="queue", name=queue, paused_at=None)
    for _ in range(3):
        assert await pauses.pauses() == [bare]
    assert await pauses.pause("queue", queue, "ops", "again", now) == (bare, True)
    assert await driver.claim("w1", 10, LEASE_MS) == []
    assert await pauses.resume("queue", queue) == bare
    assert await pauses.pauses() == []
    assert [c.record.queue for c in await driver.claim("w1", 10, LEASE_MS)] == [queue]
    assert len(_damage_logged(caplog, queue)) == 1, caplog.text


# The named lease `check_scheduler_goes_on` has another program overwrite, with the
# scheduler's lease and the state of the task it names.
LEASE = "chores"


async def check_scheduler_goes_on(
    jobs: Jobs,
    registry: JobRegistry,
    advance: Callable[[int], None],
    spoil: Overwrite,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A task's state and the leases another program overwrote: the next scheduler takes the
    leases over (a value that is no lease holds nothing, where it held for ever or failed
    every round, which stopped the worker), the task fires on from now, its next firing
    writes its state anew, and describing it answers (no last occurrence)."""

    @job(idempotency_key=lambda i: f"t:{i.order_id}", registry=registry)
    async def tick(input: Order, ctx: JobContext) -> None:
        return None

    name = f"every_minute_{new_id()}"  # a fresh name: it is logged once
    task(
        name=name,
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [Enqueue(tick, {"order_id": at})],
        registry=registry,
    )
    leases = require(jobs.driver, LEADER_LEASES)
    scheduler = require(jobs.driver, SCHEDULER)
    first = Scheduler(jobs, holder="first")
    assert await leases.lead(LEASE, "first", 60_000)
    advance(60_000)
    assert len((await first.round()).fired) == 1
    await spoil(name)

    second = Scheduler(jobs, holder="second")
    advance(60_000)
    fired = await second.round()
    assert (fired.leader, fired.failed, len(fired.fired)) == (True, {}, 1), fired
    again = await second.round()
    assert (again.leader, again.fired) == (True, []), again
    state = await scheduler.task_state(name)
    assert state is not None and state.last_fired_at == fired.fired[0].occurrence_ms, state
    assert await leases.lead(LEASE, "second", 60_000)
    assert [d.name for d in await describe_tasks(jobs)] == [name]
    assert len(_damage_logged(caplog, name)) == 1, caplog.text


async def check_rate_limits_go_on(
    jobs: Jobs,
    registry: JobRegistry,
    advance: Callable[[int], None],
    spoil_key: Overwrite,
    spoil_reservation: Overwrite,
) -> None:
    """A rate key's TAT and a shed job's reservation another program overwrote: reads pass
    them over, the job takes afresh and runs, and its take writes the key anew. Before, every
    claim under the key failed to settle, so each job stayed running and came back at its
    lease's end, for ever."""

    @job(
        idempotency_key=lambda i: f"r:{i.order_id}",
        rate_limit=RateLimit(1, per=60),
        registry=registry,
    )
    async def limited(input: Order, ctx: JobContext) -> None:
        return None

    rates = require(jobs.driver, RATES)
    first = await jobs.enqueue(limited, {"order_id": 1})
    second = await jobs.enqueue(limited, {"order_id": 2})
    worker = Worker(jobs)
    await worker.run_until_idle()
    assert [(await jobs.get(j.id)).state for j in (first, second)] == ["done", "ready"]
    (reservation,) = await rates.rate_reservations(10)
    assert reservation.job_id == second.id
    await spoil_key("job:limited")
    await spoil_reservation(second.id)
    assert (await rates.rate_states(10, ""), await rates.rate_reservations(10)) == ([], [])
    advance(60_000)
    await worker.run_until_idle()
    assert (await jobs.get(second.id)).state == "done"
    assert [s.key for s in await rates.rate_states(10, "")] == ["job:limited"]


async def check_caps_go_on(jobs: Jobs, registry: JobRegistry, spoil: Overwrite) -> None:
    """A concurrency cap's holders another program overwrote (`spoil` gets the cap's key) hold
    nothing: the jobs under the cap run, one at a time. Before, every take under the cap
    failed (NATS: each job claimed stayed running, back at its lease's end) or counted the
    holder for ever (SQLite: a cap of one never admitted another job)."""

    @job(idempotency_key=lambda i: f"c:{i.order_id}", concurrency=1, registry=registry)
    async def capped(input: Order, ctx: JobContext) -> None:
        return None

    worker = Worker(jobs)
    first = await jobs.enqueue(capped, {"order_id": 1})
    assert await worker.run_until_idle() == 1
    await spoil("job:capped")
    second = await jobs.enqueue(capped, {"order_id": 2})
    assert await worker.run_until_idle() == 1
    assert [(await jobs.get(j.id)).state for j in (first, second)] == ["done", "done"]


async def check_pruner_forgets_a_damaged_descriptor(
    jobs: Jobs, registry: JobRegistry, advance: Callable[[int], None], spoil: Overwrite
) -> None:
    """A published descriptor another program overwrote (`spoil` gets the job's name): reading
    it is DESCRIPTOR_INVALID, whose fix (a prune) forgets it. The pruner's next pass deletes no
    history (that job's published retention is unknown), forgets the row and goes on; the pass
    after it prunes as before. Before, every pass failed at its start (on NATS with a bare
    error, which ended the worker running the pruner): history was never pruned again."""

    @job(idempotency_key=lambda i: f"d:{i.order_id}", registry=registry)
    async def described(input: Order, ctx: JobContext) -> None:
        return None

    store = require(jobs.driver, DESCRIPTORS)
    done = await jobs.enqueue(described, {"order_id": 1})
    worker = Worker(jobs)
    await worker.run_until_idle()
    advance(DEFAULT_POLICY.keep_ms("done") + 1)  # type: ignore[operator]
    await worker.publish_descriptors()
    await spoil("described")
    with pytest.raises(JobsError) as raised:
        await store.published_descriptors()
    assert (raised.value.code, raised.value.retryable) == ("DESCRIPTOR_INVALID", False)
    # Its fix, `mcp-jobs db prune`, does what the pruner's pass does: forgets the row and
    # deletes no history; its dry run says so and writes nothing.
    assert raised.value.fix == "mcp-jobs db prune"
    scope = Scope(jobs, Settings(), "db prune", "test", face="cli")
    for write in (False, True):
        said = await operations.prune_history(scope, write=write)
        assert (said.unreadable_descriptor, said.more) == ("described", True), said
        assert not any((said.by_state or {}).values()), said
    left = await store.published_descriptors()
    assert left == [], left
    assert (await jobs.get(done.id)).state == "done"
    await worker.publish_descriptors()
    await spoil("described")
    pruner = Pruner(jobs)
    kept = await pruner.pass_once()
    assert (kept.leader, kept.pruned) == (True, []), kept
    assert await store.published_descriptors() == []
    assert (await pruner.pass_once()).by_state()["done"] == 1
    with pytest.raises(JobsError):
        await jobs.get(done.id)


async def check_ledger_row_is_damage(driver: Driver, now: int, overwrite: Overwrite) -> JobsError:
    """A backfill run whose ledger row another program overwrote: reading the ledger is
    STORE_DAMAGED (not retried) naming the run, never a run quietly left out, since a ledger
    that forgets a run would let a backfill run again. Answers the error, whose fix the caller
    runs as its reader would."""
    run_id = new_id()
    run = {"name": "fill", "checksum": "c", "environment": "default", "app_version": None}
    await driver.backfill_save(
        BackfillRun(run_id=run_id, status="running", rows_processed=5, started_at=now, **run)
    )
    await overwrite(run_id)
    with pytest.raises(JobsError) as raised:
        await driver.backfill_runs("fill")
    error = raised.value
    assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
    assert run_id in error.cause, error.cause
    return error


class Order(BaseModel):
    order_id: int


def declare_waiter(registry: JobRegistry) -> Any:
    """A job of three attempts that waits for `paid` keyed by its order and answers the payload."""

    @job(idempotency_key=lambda i: f"o:{i.order_id}", retry=Retry(attempts=3), registry=registry)
    async def await_payment(input: Order, ctx: JobContext) -> Any:
        outcome = await ctx.step.wait_for_event("paid", match=str(input.order_id), timeout=3600)
        return outcome.payload

    return await_payment


async def check_a_wait_fails_on_a_damaged_event(
    jobs: Jobs, registry: JobRegistry, overwrite: Overwrite
) -> ErrorPayload:
    """A job waits; the event sent for it is overwritten before it resumes. The wait fails the
    job for good with STORE_DAMAGED naming the event (retrying would read the same bytes), not a
    job error retried through its attempts. Answers the job's last error."""
    waiter = declare_waiter(registry)
    enqueued = await jobs.enqueue(waiter, {"order_id": 7})
    worker = Worker(jobs)
    await worker.run_until_idle()
    assert (await jobs.get(enqueued.id)).state == "suspended"
    sent = await jobs.send_event("paid", "7", {"amount": 42})
    await overwrite(sent.event_id)
    await worker.run_until_idle()
    record = await jobs.get(enqueued.id)
    assert (record.state, record.attempt) == ("failed", 1), record
    assert record.last_error is not None and record.last_error.code == "STORE_DAMAGED"
    assert f"inbound event {sent.event_id}: " in record.last_error.cause, record.last_error
    return record.last_error
