"""The server really stopped (`pg_ctl stop`): settles held through the outage, enqueues carried
over it, and a clear failure once the retry deadline passes.

Outages are minutes long on the injected clocks, seconds in real time: the retry deadlines and
pauses read the driver's `retry_clock` and the leases the jobs' clock, and the test moves both
while the server is down. Every wait is on an observable condition and bounded.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import anyio
import asyncpg
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, Worker, job
from engine.client import Jobs
from engine.driver_errors import DriverUnavailableError
from engine.drivers.postgres import PostgresDriver
from engine.drivers.urls import report_fix
from engine.errors import JobsError
from engine.settle import Settler
from schemas.jobs import EnqueueResult
from tests.postgres.builders import request
from tests.postgres.test_faults import _pg_ctl_command, pg_ctl
from tests.postgres.waiting import CountingClock, eventually, pump
from tests.support.fix_lines import run_fix

LEASE_MS = 30_000
POLL_MS = 500
RETRY_DEADLINE_MS = 10_000  # the driver's default


@pytest.fixture(autouse=True)
def _server_up_after() -> Iterator[None]:
    """However a test here ends (a timeout included), the next one finds the server up."""
    yield
    if not os.environ.get("MCP_JOBS_TEST_PG_BIN") or not os.environ.get("MCP_JOBS_TEST_PG_DATA"):
        return  # the tests skipped: this server is not ours to drive
    command = _pg_ctl_command("status")
    if subprocess.run(command, capture_output=True, check=False).returncode != 0:
        subprocess.run(_pg_ctl_command("restart"), capture_output=True, check=True)


@asynccontextmanager
async def server_stopped() -> AsyncIterator[None]:
    """The test database's server stopped for the block (and started again however it ends)."""
    _pg_ctl_command("stop")  # skips here when the server cannot be driven
    await pg_ctl("stop", "-m", "fast")
    try:
        yield
    finally:
        await pg_ctl("restart")


class Item(BaseModel):
    n: int


async def fetch(url: str, query: str, *args: object) -> list[asyncpg.Record]:
    """`query` on a connection of its own: one opened before an outage did not live through it."""
    conn: asyncpg.Connection[asyncpg.Record] = await asyncpg.connect(url)
    try:
        return await conn.fetch(query, *args)
    finally:
        await conn.close()


@pytest.mark.slow
async def test_a_claim_after_an_outage_first_writes_the_ack_held_through_it(
    pg_url: str, clock: ManualClock
) -> None:
    retry = CountingClock()
    driver = PostgresDriver(pg_url, clock=clock, retry_clock=retry, listen=False)
    try:
        now = clock.now_ms()
        first, second = await driver.enqueue(
            [request(now, key="first"), request(now + 1, key="second")]
        )
        (held,) = await driver.claim("w", 1, LEASE_MS)
        assert held.record.id == first.id
        clock.advance(1)
        acked = anyio.Event()

        async def ack() -> None:
            await Settler(driver).ack(held.record.id, held.token, "out")
            acked.set()

        async with anyio.create_task_group() as tg:
            async with server_stopped():
                tg.start_soon(ack)
                await eventually(lambda: retry.waiting == 1)  # the ack is held, waiting
            # The server is back and the retry clock has not moved: only the claim sends it.
            assert not acked.is_set()
            claimed = await driver.claim("w", 10, LEASE_MS)
            assert acked.is_set()
        assert [c.record.id for c in claimed] == [second.id]
        record = await driver.get(first.id)
        assert (record.state, record.output) == ("done", "out")
    finally:
        await driver.close()


@pytest.mark.slow
@pytest.mark.parametrize("outage_s", [20, 45, 270])
async def test_a_body_that_finished_as_the_server_stopped_runs_once(
    pg_url: str, clock: ManualClock, outage_s: int
) -> None:
    """20 s is within the job's 30 s lease; 45 s (what was seen) and 270 s run past it, so a
    second worker could take the job over the moment the server is back."""
    registry = JobRegistry()
    runs: list[str] = []
    body_over = anyio.Event()

    @job(name="finish", idempotency_key=lambda i: f"finish:{i.n}", registry=registry)
    async def finish(input: Item, ctx: JobContext) -> str:
        runs.append(ctx.job_id)
        if len(runs) == 1:
            await pg_ctl("stop", "-m", "fast")  # the outage begins as the body ends
            body_over.set()
        return "finished"

    _pg_ctl_command("stop")  # skips here when the server cannot be driven
    retry = CountingClock()
    # Both workers' other calls fail at once while the server is away (their settles are held
    # all the same): only the held ack waits on the retry clock.
    holder = PostgresDriver(
        pg_url, clock=clock, retry_clock=retry, retry_deadline_ms=0, listen=False
    )
    other = PostgresDriver(pg_url, clock=clock, retry_deadline_ms=0, listen=False)
    first = Worker(
        Jobs(holder, registry=registry, clock=clock),
        concurrency=1,
        lease_ms=LEASE_MS,
        poll_ms=POLL_MS,
        scheduler=False,
        outbox_relay=False,
    )
    second = Worker(
        Jobs(other, registry=registry, clock=clock),
        concurrency=1,
        lease_ms=LEASE_MS,
        scheduler=False,
        outbox_relay=False,
    )
    server_down = False
    try:
        enqueued = await Jobs(holder, registry=registry, clock=clock).enqueue(finish, {"n": 1})
        with anyio.fail_after(50):
            async with anyio.create_task_group() as tg:
                tg.start_soon(first.run)
                await body_over.wait()
                server_down = True
                await eventually(lambda: holder.db.retry.holding == 1)  # its ack is held
                with pytest.raises(JobsError) as away:
                    await second.run_until_idle()  # the other worker sees the outage too
                assert away.value.code == "DRIVER_UNAVAILABLE"
                for _ in range(outage_s // 5):
                    tried = holder.db.retry._held_tried
                    clock.advance(5_000)
                    retry.advance(5_000)
                    await tried.wait()  # the held ack tried again, and failed
                assert holder.db.retry.holding == 1  # still held after the whole outage
                await pg_ctl("restart")
                server_down = False
                # Back: the other worker takes over no lease the outage let run out...
                assert await second.run_until_idle() == 0
                # ...and the holder, at its next claim, writes its ack first.

                def ack_written() -> bool:
                    clock.advance(POLL_MS)
                    return holder.db.retry.holding == 0

                await eventually(ack_written, every=0.02)
                first.stop()
        clock.advance(3 * LEASE_MS)
        assert await second.run_until_idle() == 0
    finally:
        if server_down:
            await pg_ctl("restart")
        await holder.close()
        await other.close()
    assert runs == [enqueued.id]  # the finished body ran once
    (record,) = await fetch(pg_url, "SELECT state, attempt, output FROM mcp_jobs.jobs")
    assert dict(record) == {"state": "done", "attempt": 1, "output": '"finished"'}


@pytest.mark.slow
async def test_enqueues_during_a_short_outage_are_carried_over_by_the_retry(
    pg_url: str, clock: ManualClock
) -> None:
    retry = CountingClock()
    driver = PostgresDriver(pg_url, clock=clock, retry_clock=retry, listen=False)
    singles: dict[int, list[EnqueueResult]] = {}
    batch: list[EnqueueResult] = []
    all_in = anyio.Event()
    try:
        await driver.stats()  # connections open before the outage, as in a running producer
        now = clock.now_ms()

        async def one(n: int) -> None:
            singles[n] = await driver.enqueue([request(now, key=f"one:{n}")])
            if len(singles) == 8 and batch:
                all_in.set()

        async def many() -> None:
            batch.extend(await driver.enqueue([request(now, key=f"many:{n}") for n in range(3)]))
            if len(singles) == 8:
                all_in.set()

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                async with server_stopped():
                    for n in range(8):
                        tg.start_soon(one, n)
                    tg.start_soon(many)
                    await eventually(lambda: retry.waiting == 9)  # every call is waiting
                await pump(retry, all_in, 100)
        assert retry.now_ms() < RETRY_DEADLINE_MS  # carried over, well within the deadline
    finally:
        await driver.close()
    answers = [r for results in singles.values() for r in results] + batch
    assert len(answers) == 11 and not any(r.deduped for r in answers)
    stored = await fetch(pg_url, "SELECT id FROM mcp_jobs.jobs")
    assert sorted(r["id"] for r in stored) == sorted(r.id for r in answers)  # one job each


@pytest.mark.slow
async def test_past_the_retry_deadline_a_call_fails_with_what_it_tried(
    pg_url: str, clock: ManualClock
) -> None:
    retry = CountingClock()
    driver = PostgresDriver(pg_url, clock=clock, retry_clock=retry, listen=False)
    at_once = PostgresDriver(pg_url, clock=clock, retry_deadline_ms=0, listen=False)
    failed: list[DriverUnavailableError] = []
    over = anyio.Event()

    async def enqueue() -> None:
        try:
            await driver.enqueue([request(clock.now_ms(), key="late")])
        except DriverUnavailableError as exc:
            failed.append(exc)
            over.set()

    try:
        with anyio.fail_after(30):
            async with server_stopped():
                with pytest.raises(DriverUnavailableError):  # retries turned off: at once
                    await at_once.enqueue([request(clock.now_ms(), key="now")])
                async with anyio.create_task_group() as tg:
                    tg.start_soon(enqueue)
                    await eventually(lambda: retry.waiting == 1)
                    retry.advance(RETRY_DEADLINE_MS - 1_000)
                    await eventually(lambda: retry.waiting == 1)
                    assert not over.is_set()  # still trying before the deadline
                    await pump(retry, over, 200)
    finally:
        await driver.close()
        await at_once.close()
    (error,) = failed
    assert error.code == "DRIVER_UNAVAILABLE" and error.retryable
    assert error.fix == report_fix(pg_url)
    assert "server: PostgreSQL " in run_fix(error.fix)  # the server is back: it answers
    assert error.details is not None
    assert error.details["tried_ms"] >= RETRY_DEADLINE_MS and error.details["tries"] > 2
    assert isinstance(error.__cause__, OSError)  # the last failure itself, chained
