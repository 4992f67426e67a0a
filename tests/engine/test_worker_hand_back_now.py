"""The second stop (`Worker.hand_back_now()`, the CLI's second Ctrl-C): the run ends now, as a
run returns (no cancellation leaks to its caller), its bodies stopped and their jobs handed back
unharmed; one line says so."""

from __future__ import annotations

import asyncio
import logging

import anyio
import pytest

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.drivers.memory import MemoryDriver
from engine.testing.blocked import wait_all_tasks_blocked
from tests.support.worker_jobs import Item, keyed_job


async def test_a_second_stop_hands_a_running_job_back_and_run_returns(
    clock: ManualClock, registry: JobRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = Jobs(MemoryDriver(clock), registry=registry, clock=clock)

    async def endless(item: Item) -> None:
        await anyio.sleep_forever()

    enqueued = await jobs.enqueue(keyed_job(registry, endless), {"n": 1})
    worker = Worker(jobs, concurrency=2, scheduler=False, outbox_relay=False)
    caplog.set_level(logging.INFO)
    with anyio.fail_after(10):
        run = asyncio.create_task(worker.run())
        await wait_all_tasks_blocked()
        worker.stop()
        await wait_all_tasks_blocked()
        assert not run.done()  # the first stop waits for the body (its drain deadline is far)
        assert worker.hand_back_now() == 0  # the memory driver holds no settle
        await run  # returns: no CancelledError for the caller
    record = await jobs.get(enqueued.id)
    assert (record.state, record.attempt) == ("ready", 0)  # handed back, no attempt spent
    (line,) = [r.getMessage() for r in caplog.records if "stopped again" in r.getMessage()]
    assert "handing back 1 job(s) in flight now" in line and "abandoned" not in line
