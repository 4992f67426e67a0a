"""A worker stopped twice while its database is away ends within a bound (HAND_BACK_MS on its own
clock), not when the database returns: the settles it held are let go, said in one line, and
their jobs are taken over once their leases run out.

The server really stops (`pg_ctl stop`, the test server's, as in tests/postgres/test_outage.py);
the jobs' clock and the retry clock are the test's, and only the jobs' clock is moved: a wait
on the retry clock (a held settle, a retry deadline) would never end. Every wait is on an
observable condition and bounded.
"""

from __future__ import annotations

import logging

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, Worker, job
from engine.client import Jobs
from engine.driver_errors import DriverUnavailableError
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.retry import Retrier
from engine.worker_hand_back import HAND_BACK_MS
from tests.postgres.test_faults import _pg_ctl_command, pg_ctl
from tests.postgres.test_outage import _server_up_after, fetch
from tests.postgres.waiting import CountingClock, eventually

__all__ = ["_server_up_after"]  # autouse: however a test here ends, the next finds the server up

URL = "postgresql://u@127.0.0.1:1/db"
LEASE_MS = 30_000
STEP_MS = 100


def _lost() -> DriverUnavailableError:
    error = DriverUnavailableError("postgres", "connection lost", "fix")
    error.__cause__ = ConnectionResetError("reset by peer")
    return error


async def test_let_go_ends_a_held_settle_at_its_next_try_with_no_line_of_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = CountingClock()
    retrier = Retrier(URL, deadline_ms=10_000, settle_deadline_ms=300_000, clock=clock)
    tries: list[bool] = []

    async def settle(first: bool) -> None:
        tries.append(first)
        raise _lost()

    failed: list[DriverUnavailableError] = []

    async def held() -> None:
        try:
            await retrier.resilient(settle)
        except DriverUnavailableError as exc:
            failed.append(exc)

    caplog.set_level(logging.INFO)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(held)
            await eventually(lambda: clock.waiting == 1)  # held; its pause's clock never moves
            before = len(tries)
            assert retrier.let_go() == 1
    assert len(failed) == 1 and retrier.holding == 0
    assert len(tries) == before + 1  # one try more, at once, and no pause after it
    # The caller's one line says it for every hold let go: none of its own.
    assert not _hold_ends(caplog), caplog.text
    # Once let go, a retry fails at its first break rather than waiting out its deadline.
    tries.clear()
    with anyio.fail_after(10), pytest.raises(DriverUnavailableError):
        await retrier.retrying(settle)
    assert tries == [True]


def _hold_ends(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The lines of holds that ended unwritten, each its own (engine/drivers/holding.py)."""
    return [
        r
        for r in caplog.records
        if r.name == "engine.drivers.holding" and "is not written" in r.getMessage()
    ]


class Item(BaseModel):
    n: int


@pytest.mark.slow
async def test_a_worker_stopped_twice_in_an_outage_ends_within_its_bound_and_leases_hand_on(
    pg_url: str, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    registry = JobRegistry()
    finished: list[str] = []
    long_runs: list[str] = []
    body_over = anyio.Event()
    long_began = anyio.Event()

    @job(name="finish", idempotency_key=lambda i: f"finish:{i.n}", registry=registry)
    async def finish(input: Item, ctx: JobContext) -> str:
        finished.append(ctx.job_id)
        if len(finished) == 1:
            await long_began.wait()
            await pg_ctl("stop", "-m", "fast")  # the outage begins as the body ends
            body_over.set()
        return "finished"

    @job(name="long", idempotency_key=lambda i: f"long:{i.n}", registry=registry)
    async def long(input: Item, ctx: JobContext) -> str:
        long_runs.append(ctx.job_id)
        if len(long_runs) == 1:
            long_began.set()
            await anyio.sleep_forever()  # still running at both stops
        return "long"

    _pg_ctl_command("stop")  # skips here when the server cannot be driven
    retry = CountingClock()  # never moved: a held settle waits on it for good
    driver = PostgresDriver(pg_url, clock=clock, retry_clock=retry, listen=False)
    jobs = Jobs(driver, registry=registry, clock=clock)
    worker = Worker(
        jobs,
        concurrency=2,
        lease_ms=LEASE_MS,
        scheduler=False,
        outbox_relay=False,
        prune=False,
    )
    server_down = False
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
                server_down = True
                await eventually(lambda: driver.db.retry.holding == 1)  # its ack is held
            worker.stop()
            began = clock.now_ms()
            assert worker.hand_back_now() == 1

            def over() -> bool:
                if not ended.is_set():
                    clock.advance(STEP_MS)
                return ended.is_set()

            with anyio.fail_after(30):  # before the fix: until the server came back
                await eventually(over, every=0.01)
        # Within the hand-back's bound on the worker's own clock (plus the step that saw it).
        assert clock.now_ms() - began <= HAND_BACK_MS + STEP_MS
        with anyio.fail_after(30):
            await jobs.close()  # the held ack no longer keeps the close waiting
        said = [r.getMessage() for r in caplog.records if "stopped again" in r.getMessage()]
        assert len(said) == 1 and "1 settle(s)" in said[0] and "leases run out" in said[0], said
        assert not _hold_ends(caplog)

        await pg_ctl("restart")
        server_down = False
        other = Jobs(
            PostgresDriver(pg_url, clock=clock, listen=False), registry=registry, clock=clock
        )
        try:
            taker = Worker(other, lease_ms=LEASE_MS, scheduler=False, outbox_relay=False)
            with anyio.fail_after(30):
                assert await taker.run_until_idle() == 0  # their leases still hold them
                clock.advance(LEASE_MS)
                assert await taker.run_until_idle() == 2  # run out: taken over
        finally:
            await other.close()
    finally:
        if server_down:
            await pg_ctl("restart")
        await jobs.close()
    assert finished == [ids[0], ids[0]]  # the ack let go: its body ran again
    rows = await fetch(pg_url, "SELECT id, state FROM mcp_jobs.jobs ORDER BY id")
    assert {r["id"]: r["state"] for r in rows} == dict.fromkeys(ids, "done")
