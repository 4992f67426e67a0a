"""The worker as a plain program uses it: `async with Worker(...)` / `start()` and `stop()`, the
queues it claims from, and the services it runs only when they have something to do."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, job
from engine.drivers.memory import MemoryDriver
from engine.errors import InvalidArgumentError
from engine.tasks import task
from engine.testing.blocked import wait_all_tasks_blocked
from engine.worker_presence import PRESENCE_MS
from tests.support.worker_jobs import Item, keyed_job, recording_job


class Other(BaseModel):
    n: int


def other_queue_job(registry: JobRegistry) -> None:
    @job(name="elsewhere", queue="other", idempotency_key=lambda i: str(i.n), registry=registry)
    async def elsewhere(input: Other, ctx: JobContext) -> None:
        return None


async def test_async_with_runs_the_worker_and_leaving_the_block_drains_it(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    done = anyio.Event()

    async def body(item: Item) -> None:
        done.set()

    work = keyed_job(registry, body)
    with anyio.fail_after(10):
        async with Worker(jobs) as worker:
            # start() returned: the worker has claimed once and waits for work.
            assert worker.in_flight == 0
            queued = await jobs.enqueue(work, {"n": 1})
            await done.wait()
        assert worker.in_flight == 0
    assert (await jobs.get(queued.id)).state == "done"


async def test_stop_is_awaitable_and_drains_what_is_in_flight(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    release, started = anyio.Event(), anyio.Event()

    async def body(item: Item) -> None:
        started.set()
        await release.wait()

    queued = await jobs.enqueue(keyed_job(registry, body), {"n": 1})
    worker = Worker(jobs)
    with anyio.fail_after(10):
        await worker.start()
        await started.wait()
        stopping = worker.stop()
        assert (await jobs.get(queued.id)).state == "running"
        release.set()
        await stopping  # returns once the in-flight job settled
    assert (await jobs.get(queued.id)).state == "done"
    with anyio.fail_after(10):
        await worker.stop()  # a second stop of a stopped worker returns at once


async def test_a_worker_claims_only_the_queues_of_the_jobs_it_knows(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    other_queue_job(registry)
    theirs = await jobs.enqueue("elsewhere", {"n": 1})
    # This worker's deploy knows only `work` (queue "default"), not `elsewhere`.
    mine = JobRegistry()
    work, ran = recording_job(mine)
    ours = await jobs.enqueue(work, {"n": 2})
    worker = Worker(Jobs(jobs.driver, registry=mine, clock=clock))
    assert worker.queues == ["default"]
    assert await worker.run_until_idle() == 1
    assert ran == [2] and (await jobs.get(ours.id)).state == "done"
    record = await jobs.get(theirs.id)
    assert (record.state, record.attempt) == ("ready", 0)  # never claimed, never parked


@pytest.mark.parametrize("queues", ["*", ["other"]])
async def test_a_worker_told_its_queues_claims_from_them(
    clock: ManualClock, registry: JobRegistry, queues: str | list[str]
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    other_queue_job(registry)
    theirs = await jobs.enqueue("elsewhere", {"n": 1})
    worker = Worker(Jobs(jobs.driver, registry=JobRegistry(), clock=clock), queues=queues)
    assert worker.queues == (None if queues == "*" else ["other"])
    assert await worker.run_until_idle() == 1
    assert (await jobs.get(theirs.id)).state == "suspended"  # claimed, its name unknown: parked


async def test_queues_must_be_a_list_or_the_star(registry: JobRegistry) -> None:
    jobs = Jobs(MemoryDriver(ManualClock()), registry=registry)
    with pytest.raises(Exception) as refused:
        Worker(jobs, queues="default")
    assert getattr(refused.value, "code", None) == "INVALID_ARGUMENT"


async def test_the_scheduler_runs_only_where_tasks_are_registered(
    clock: ManualClock, registry: JobRegistry
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)
    work = keyed_job(registry)
    assert Worker(jobs).scheduler is None
    task(
        name="minutely",
        cron="* * * * *",
        tz="UTC",
        enqueue=lambda at: [(work, {"n": 1})],
        registry=registry,
    )
    assert Worker(jobs).scheduler is not None
    assert Worker(jobs, scheduler=False).scheduler is None


async def test_the_outbox_relay_runs_only_where_the_outbox_is_in_use(
    clock: ManualClock, registry: JobRegistry
) -> None:
    driver = MemoryDriver(clock)
    jobs = Jobs(driver, registry=registry, clock=clock)
    work = keyed_job(registry)
    idle = Worker(jobs)
    assert await idle.run_until_idle() == 0
    assert idle.outbox_relay is None
    assert Worker(jobs, outbox_relay=True).outbox_relay is not None
    with anyio.fail_after(10):
        async with Worker(jobs) as worker:
            assert worker.outbox_relay is None  # nothing staged, nothing waiting
            tx = driver.transaction()
            staged = await jobs.stage(tx, work, {"n": 1})
            driver.commit(tx)
            assert worker.outbox_relay is not None  # the first stage started one
            while (await jobs.list()).jobs == []:
                clock.advance(worker.outbox_relay.poll_ms)
                await wait_all_tasks_blocked()
    assert (await jobs.get(staged.job_id)).state == "done"


async def test_a_worker_that_finds_staged_rows_waiting_starts_a_relay(
    clock: ManualClock, registry: JobRegistry
) -> None:
    driver = MemoryDriver(clock)
    work = keyed_job(registry)
    # Another process staged a job; this worker's own client never did.
    app = Jobs(driver, registry=registry, clock=clock)
    tx = driver.transaction()
    staged = await app.stage(tx, work, {"n": 1})
    driver.commit(tx)
    worker = Worker(Jobs(driver, registry=registry, clock=clock))
    assert worker.outbox_relay is None
    with anyio.fail_after(10):
        async with worker:
            assert worker.outbox_relay is not None
            await wait_all_tasks_blocked()
    assert (await app.get(staged.job_id)).state == "done"


async def test_rows_another_process_stages_later_start_a_relay(
    clock: ManualClock, registry: JobRegistry
) -> None:
    driver = MemoryDriver(clock)
    work = keyed_job(registry)
    app = Jobs(driver, registry=registry, clock=clock)
    worker = Worker(Jobs(driver, registry=registry, clock=clock))
    with anyio.fail_after(10):
        async with worker:
            assert worker.outbox_relay is None  # nothing staged yet, anywhere
            # Another process stages after the worker started; this worker's client never did.
            tx = driver.transaction()
            staged = await app.stage(tx, work, {"n": 1})
            driver.commit(tx)
            while worker.outbox_relay is None or (await app.list()).jobs == []:
                clock.advance(PRESENCE_MS)
                await wait_all_tasks_blocked()
            while (await app.get(staged.job_id)).state != "done":
                clock.advance(PRESENCE_MS)
                await wait_all_tasks_blocked()


@pytest.mark.parametrize(
    "options",
    [
        {"poll_ms": -1},
        {"poll_ms": "x"},
        {"drain_ms": -1},
        {"drain_ms": float("nan")},
        {"lease_ms": 10**30},
        {"worker_id": ""},
        {"worker_id": "a\x00b"},
        {"queues": [""]},
        {"queues": ["mail", "q\x00"]},
        {"listeners": [1]},
        # Each was an AttributeError or TypeError when first used, or read as something else:
        # a module name as a list of one-letter modules, "yes" as true.
        {"listeners": 5},
        {"listeners": print},
        {"limits": 5},
        {"retention": "7d"},
        {"apps": "examples.shop"},
        {"apps": ["examples.shop", ""]},
        {"scheduler": "yes"},
        {"outbox_relay": 1},
        {"prune": "off"},
    ],
)
async def test_a_worker_refuses_a_bad_setting_before_it_runs(
    jobs: Jobs, options: dict[str, Any]
) -> None:
    """Each was taken (before): a wait of -1 ms or "x" broke the loop later, a NUL in a queue
    or the worker's id failed every claim or beat, a lease past the stored range every claim."""
    with pytest.raises(InvalidArgumentError) as refused:
        Worker(jobs, **options)
    assert refused.value.argument == next(iter(options)) and not refused.value.retryable


async def test_a_worker_takes_its_listeners_and_apps_from_any_iterable(jobs: Jobs) -> None:
    """Read once: a generator's items are the worker's, not lost to the check that reads them."""
    seen: list[object] = []
    worker = Worker(jobs, listeners=(f for f in [seen.append]), apps=iter(["examples.shop"]))
    assert seen.append in worker.events.listeners and worker.presence.apps == ["examples.shop"]


@pytest.mark.parametrize("given", [None, "memory://", 3])
def test_a_worker_given_no_jobs_client_is_told_which_to_give(given: Any) -> None:
    """`Worker(None)` (or a URL) was an AttributeError on `.driver`: a typed refusal naming
    the client `connect()` returns."""
    with pytest.raises(InvalidArgumentError) as refused:
        Worker(given)
    assert refused.value.argument == "jobs" and not refused.value.retryable
    assert "connect(" in refused.value.fix
