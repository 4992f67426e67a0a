"""A worker stopped twice while its server is away, on a server the test stops itself: it ends
within HAND_BACK_MS on its own clock, not when the server returns; the settle it held is let go,
said in the worker's one line and in no line of its own (neither the hold's nor the job's), and
the jobs are taken over once their leases run out. The body still running at the second stop is
cancelled then, not once the worker's loops beside its jobs (the pruner's release of its lease,
waiting for the server away) are over. PostgreSQL (with `pg_ctl`), Redis and NATS each run it
on a server the test stops itself.

The jobs' clock and the retry clock are the test's, and only the jobs' clock is moved: a wait on
the retry clock (a held settle) would never end. Every wait is on an observable condition and
bounded.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, Worker, job
from engine.client import Jobs
from engine.drivers.base import Driver
from engine.worker_hand_back import HAND_BACK_MS
from tests.postgres.waiting import eventually

LEASE_MS = 30_000
STEP_MS = 100


@dataclass
class Outage:
    """The driver under test (on `clock`, its retry clock never moved) and its server."""

    driver: Driver
    clock: ManualClock
    held: Callable[[], int]  # how many settles the driver holds now
    stop: Callable[[], Awaitable[None]]  # the outage begins
    restart: Callable[[], Awaitable[None]]  # the server is back, with what it had stored
    other: Callable[[], Driver]  # a second process's driver, once it is back


class Item(BaseModel):
    n: int


def said_of_the_held(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Lines a settle let go must not have of its own: its hold's end (engine/drivers/holding.py)
    and its job's "not written yet" (engine/settle.py `until_written`)."""
    return [
        r.getMessage()
        for r in caplog.records
        if (r.name == "engine.drivers.holding" and "is not written" in r.getMessage())
        or "is not written yet" in r.getMessage()
    ]


async def stopped_twice_in_an_outage(outage: Outage, caplog: pytest.LogCaptureFixture) -> None:
    registry = JobRegistry()
    finished: list[str] = []
    long_runs: list[str] = []
    body_over = anyio.Event()
    long_began = anyio.Event()
    long_cancelled = anyio.Event()

    @job(name="finish", idempotency_key=lambda i: f"finish:{i.n}", registry=registry)
    async def finish(input: Item, ctx: JobContext) -> str:
        finished.append(ctx.job_id)
        if len(finished) == 1:
            await long_began.wait()
            await outage.stop()  # the outage begins as the body ends
            body_over.set()
        return "finished"

    @job(name="long", idempotency_key=lambda i: f"long:{i.n}", registry=registry)
    async def long(input: Item, ctx: JobContext) -> str:
        long_runs.append(ctx.job_id)
        if len(long_runs) == 1:
            long_began.set()
            try:
                await anyio.sleep_forever()  # still running at both stops
            except anyio.get_cancelled_exc_class():
                long_cancelled.set()
                raise
        return "long"

    clock = outage.clock
    jobs = Jobs(outage.driver, registry=registry, clock=clock)
    # The pruner leads its lease from its first pass: the first stop's release of it waits for
    # the server away (NATS: until its request times out), and the second stop must not.
    worker = Worker(
        jobs, concurrency=2, lease_ms=LEASE_MS, scheduler=False, outbox_relay=False, prune=True
    )
    caplog.set_level(logging.INFO)
    try:
        ids = [(await jobs.enqueue(f, {"n": 1})).id for f in (finish, long)]
        ended = anyio.Event()

        async def run() -> None:
            await worker.run()
            ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            with anyio.fail_after(30):
                await body_over.wait()
                await eventually(lambda: outage.held() == 1)  # its ack is held
            worker.stop()
            began = clock.now_ms()
            assert worker.hand_back_now() == 1
            # The body still running is cancelled at once, its clock unmoved: not once the
            # run's loops (the pruner's release) are over, when it may have run to its end.
            with anyio.fail_after(0.5):
                await long_cancelled.wait()
            assert clock.now_ms() == began

            def over() -> bool:
                # The worker's clock goes no further than its bound (and the step that passes
                # it): what a call to the server away takes in real time does not move it.
                if clock.now_ms() - began <= HAND_BACK_MS:
                    clock.advance(STEP_MS)
                return ended.is_set()

            with anyio.fail_after(30):
                await eventually(over, within=30, every=0.01)
        with anyio.fail_after(20):  # without let_go: for up to settle_retry_ms
            await jobs.close()  # the held ack no longer keeps the close waiting
        said = [r.getMessage() for r in caplog.records if "stopped again" in r.getMessage()]
        assert len(said) == 1 and "1 settle(s)" in said[0] and "leases run out" in said[0], said
        assert not said_of_the_held(caplog), caplog.text
        # What the second stop left to run out is said in its last line, not in lines of its own.
        alone = [r.getMessage() for r in caplog.records if r.getMessage().endswith("deregister")]
        assert not alone, alone

        with anyio.fail_after(30):
            await outage.restart()
        other = Jobs(outage.other(), registry=registry, clock=clock)
        try:
            taker = Worker(other, lease_ms=LEASE_MS, scheduler=False, outbox_relay=False)
            with anyio.fail_after(30):
                assert await taker.run_until_idle() == 0  # their leases still hold them
                clock.advance(LEASE_MS)
                assert await taker.run_until_idle() == 2  # run out: taken over
            states = {i: (await other.get(i)).state for i in ids}
        finally:
            await other.close()
    finally:
        with anyio.move_on_after(10):  # a close that hangs has failed the test above already
            await jobs.close()
    assert finished == [ids[0], ids[0]]  # the ack let go: its body ran again
    assert states == dict.fromkeys(ids, "done")
