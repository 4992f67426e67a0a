"""A pass of a worker's loops beside its jobs that fails (engine/services.py) is logged and tried
again at the next: it never ends the worker, which would stop its jobs too."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from anyio.lowlevel import checkpoint
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, OutboxRelay, Scheduler, Worker, job
from engine.driver_errors import DriverUnavailableError
from engine.pruner import Pruner
from engine.testing.blocked import wait_all_tasks_blocked

Service = Scheduler | OutboxRelay | Pruner
SERVICES: dict[str, tuple[Callable[[Jobs], Service], str]] = {
    "scheduler": (Scheduler, "round"),
    "outbox relay": (OutboxRelay, "pass_once"),
    "pruner": (Pruner, "pass_once"),
}


@pytest.mark.parametrize("name", list(SERVICES))
@pytest.mark.parametrize(
    ("failure", "logged"),
    [
        (RuntimeError("a defect"), "failed unexpectedly, retrying"),
        (DriverUnavailableError("memory", "away"), "failed, retrying: DRIVER_UNAVAILABLE"),
    ],
)
async def test_a_failed_pass_is_logged_and_the_next_one_runs(
    jobs: Jobs,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    failure: Exception,
    logged: str,
) -> None:
    make, method = SERVICES[name]
    service = make(jobs)
    passes = 0

    async def fails_once() -> None:
        nonlocal passes
        passes += 1
        await checkpoint()
        if passes == 1:
            raise failure
        service.stop()

    monkeypatch.setattr(service, method, fails_once)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(service.run)
            await wait_all_tasks_blocked()  # the first pass failed; the service waits
            assert passes == 1
            clock.advance(24 * 3_600_000)  # past any service's wait
            await service.wait_stopped()
    assert passes == 2
    assert logged in caplog.text, caplog.text


class Item(BaseModel):
    n: int


async def test_a_worker_whose_beats_fail_unexpectedly_runs_its_jobs(
    jobs: Jobs,
    registry: JobRegistry,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its presence beat and a running job's lease heartbeat raise: both are logged, and the job
    runs to its end. Before, either ended the worker (and the job with it)."""
    started, release = anyio.Event(), anyio.Event()

    @job(idempotency_key=lambda i: f"s:{i.n}", registry=registry)
    async def slow(input: Item, ctx: JobContext) -> None:
        started.set()
        await release.wait()

    async def broken(*args: object) -> None:
        raise RuntimeError("a defect")

    monkeypatch.setattr(jobs.driver, "worker_seen", broken)
    monkeypatch.setattr(jobs.driver, "heartbeat", broken)
    enqueued = await jobs.enqueue(slow, {"n": 1})
    worker = Worker(jobs, concurrency=1, scheduler=False, outbox_relay=False)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            while not started.is_set():
                await wait_all_tasks_blocked()
                clock.advance(worker.poll_ms)
            clock.advance(worker.lease_ms // 3)  # a heartbeat's turn
            await wait_all_tasks_blocked()
            release.set()
            await worker.drain()
    assert (await jobs.get(enqueued.id)).state == "done"
    assert "worker presence beat failed unexpectedly" in caplog.text, caplog.text
    assert "lease heartbeat failed unexpectedly" in caplog.text, caplog.text
