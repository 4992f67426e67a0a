"""Faults and concurrency on a real server with real processes.

Worker processes use real time (short leases), but every wait here is on an observable
condition — a row's state, a line a process wrote — and bounded; none sleeps for time to pass.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import asyncpg
import pytest

from engine import ManualClock, SystemClock
from engine.driver_errors import DriverUnavailableError
from engine.drivers.postgres import PostgresDriver
from engine.errors import JobsError
from schemas.jobs import EnqueueRequest, EnqueueResult, NackOptions
from tests.postgres.builders import failure, request
from tests.postgres.waiting import eventually
from tests.support.worker_processes import ids_after, lines, worker_process

# Past any finish time: an interval that counts every settled row.
EVER = 2**62


async def done_count(driver: PostgresDriver) -> int:
    # Every done row (the stats count only a recent window's newest 1,000).
    try:
        counts = await driver.settled_counts(0, EVER)
    except DriverUnavailableError:
        return -1  # the server is away: not done, look again
    return sum(c.done for c in counts.values())


def noop_requests(now: int, count: int) -> list[EnqueueRequest]:
    return [request(now, name="noop", key=f"noop:{n}", input={"n": n}) for n in range(count)]


async def test_fifty_concurrent_enqueues_of_one_key_make_one_live_row(
    pg_url: str, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    drivers = [PostgresDriver(pg_url, clock=clock, listen=False, pool_max=1) for _ in range(50)]
    results: list[EnqueueResult] = []
    go = anyio.Event()
    try:
        for d in drivers:
            await d.stats()  # each has its own connection open before the race starts

        async def enqueue(d: PostgresDriver) -> None:
            await go.wait()
            results.extend(await d.enqueue([request(clock.now_ms(), key="same", tenant_id="t")]))

        async with anyio.create_task_group() as tg:
            for d in drivers:
                tg.start_soon(enqueue, d)
            go.set()
    finally:
        for d in drivers:
            await d.close()
    assert len(results) == 50
    assert len({r.id for r in results}) == 1
    assert [r.deduped for r in results].count(False) == 1
    assert await sql.fetchval("SELECT count(*) FROM mcp_jobs.jobs") == 1


async def test_enqueues_waiting_on_an_uncommitted_holder_dedupe_to_it(
    pg_url: str, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    """The race the live lookup cannot see: the holder commits after the enqueue statement
    began, so ON CONFLICT skips the row while the statement's snapshot does not show it. The
    driver must look again rather than answer nothing (or insert a second live row)."""
    drivers = [PostgresDriver(pg_url, clock=clock, listen=False, pool_max=1) for _ in range(20)]
    holder = PostgresDriver(pg_url, clock=clock, listen=False)
    watcher: asyncpg.Connection[asyncpg.Record] = await asyncpg.connect(pg_url)
    results: list[EnqueueResult] = []

    async def enqueue(d: PostgresDriver) -> None:
        results.extend(await d.enqueue([request(clock.now_ms(), key="same", tenant_id="t")]))

    async def all_blocked() -> bool:
        waiting: int = await watcher.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND application_name = 'mcp-jobs'"
        )
        return waiting == len(drivers)

    try:
        for d in drivers:
            await d.stats()
        tx = sql.transaction()
        await tx.start()
        (held,), _ = await holder.enqueuer.enqueue_on(
            sql, [request(clock.now_ms(), key="same", tenant_id="t")]
        )
        async with anyio.create_task_group() as tg:
            for d in drivers:
                tg.start_soon(enqueue, d)
            await eventually(all_blocked)  # every one is waiting on the holder's row
            await tx.commit()
    finally:
        await watcher.close()
        for d in [*drivers, holder]:
            await d.close()
    assert len(results) == len(drivers)
    assert {(r.id, r.deduped) for r in results} == {(held.id, True)}
    assert await sql.fetchval("SELECT count(*) FROM mcp_jobs.jobs") == 1


async def test_another_tenants_job_is_not_found_and_nothing_changes(
    pg_url: str, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    driver = PostgresDriver(pg_url, clock=clock, listen=False)
    try:
        now = clock.now_ms()
        live, dead = await driver.enqueue(
            [request(now, key="live", tenant_id="a"), request(now, key="dead", tenant_id="a")]
        )
        claimed = {c.record.id: c for c in await driver.claim("w", 10, 60_000)}
        await driver.nack(
            dead.id, claimed[dead.id].token, NackOptions(error=failure("x"), dead_letter=True)
        )
        before = await sql.fetch("SELECT * FROM mcp_jobs.jobs ORDER BY id")
        events = await sql.fetchval("SELECT count(*) FROM mcp_jobs.events")
        for job_id in (live.id, dead.id, "no-such-job"):
            for call in (
                lambda j=job_id: driver.get(j, "b"),
                lambda j=job_id: driver.load_trace(j, "b"),
                lambda j=job_id: driver.cancel(j, "b", "intruder"),
                lambda j=job_id: driver.retry(j, "b", True, "intruder"),
            ):
                with pytest.raises(JobsError) as raised:
                    await call()
                assert raised.value.code == "JOB_NOT_FOUND"
        assert await sql.fetch("SELECT * FROM mcp_jobs.jobs ORDER BY id") == before
        assert await sql.fetchval("SELECT count(*) FROM mcp_jobs.events") == events
        # The owner still reaches both.
        assert (await driver.cancel(live.id, "a", "owner")).state == "cancelled"
        assert (await driver.retry(dead.id, "a", False, "owner")).state == "ready"
    finally:
        await driver.close()


@pytest.mark.slow
async def test_two_worker_processes_run_two_thousand_jobs_exactly_once(
    pg_url: str, tmp_path: Path, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    driver = PostgresDriver(pg_url, clock=SystemClock(), listen=False)
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    try:
        async with (
            worker_process(pg_url, logs[0], "--concurrency", "8"),
            worker_process(pg_url, logs[1], "--concurrency", "8"),
        ):
            enqueued = await driver.enqueue(noop_requests(SystemClock().now_ms(), 2_000))

            async def all_done() -> bool:
                return await done_count(driver) == 2_000

            await eventually(all_done, within=90, every=0.1)
        attempts = {
            row["attempt"]: row["count"]
            for row in await sql.fetch(
                "SELECT attempt, count(*) FROM mcp_jobs.jobs GROUP BY attempt"
            )
        }
    finally:
        await driver.close()
    ran = ids_after("ran ", logs)
    assert len(ran) == 2_000
    assert sorted(ran) == sorted(r.id for r in enqueued)  # every job, each exactly once
    assert attempts == {1: 2_000}  # and each was claimed once


@pytest.mark.slow
async def test_a_killed_worker_s_job_finishes_elsewhere_without_rerunning_its_steps(
    pg_url: str, tmp_path: Path
) -> None:
    driver = PostgresDriver(pg_url, clock=SystemClock(), listen=False)
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    try:
        (r,) = await driver.enqueue(
            [request(SystemClock().now_ms(), name="three_steps", key="three:1", input={"n": 1})]
        )
        async with worker_process(pg_url, first, "--block-step=3", "--lease-ms", "1500") as doomed:
            await eventually(lambda: "step three started" in lines(first), within=30)
            doomed.send_signal(signal.SIGKILL)
            await doomed.wait()
        steps = await driver.load_steps(r.run_id)
        assert [(s.name, s.status) for s in steps] == [("one", "completed"), ("two", "completed")]
        assert (await driver.get(r.id)).state == "running"  # a dead holder's lease, not settled
        async with worker_process(pg_url, second, "--lease-ms", "1500"):

            async def done() -> bool:
                return (await driver.get(r.id)).state == "done"

            await eventually(done, within=30, every=0.05)
        record = await driver.get(r.id)
    finally:
        await driver.close()
    assert lines(first) == ["worker up", "step one 1", "step two 1", "step three started"]
    # One and two replayed, not re-run.
    assert lines(second) == ["worker up", "step three 1", f"acked {r.id}"]
    assert (record.attempt, record.output) == (2, "step one 1 | step two 1 | step three 1")


def _pg_ctl_command(*args: str) -> list[str]:
    pg_bin = os.environ.get("MCP_JOBS_TEST_PG_BIN")
    data = os.environ.get("MCP_JOBS_TEST_PG_DATA")
    if not pg_bin or not data:
        pytest.skip("MCP_JOBS_TEST_PG_BIN/_DATA are not set (.ci/run sets them)")
    log = os.environ.get("MCP_JOBS_TEST_PG_LOG", "/dev/null")
    command = [f"{pg_bin}/pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", *args]
    user = os.environ.get("MCP_JOBS_TEST_PG_USER")
    if os.geteuid() == 0 and user and user != "root":
        command = ["runuser", "-u", user, "--", *command]
    return command


async def pg_ctl(*args: str) -> None:
    # Output to files, never pipes: a started postmaster would hold a pipe open forever.
    result = await anyio.run_process(_pg_ctl_command(*args), check=False, stdout=None, stderr=None)
    assert result.returncode == 0, f"pg_ctl {' '.join(args)} failed"


@pytest.mark.slow
async def test_a_worker_rides_out_a_server_restart_and_every_job_runs_once(
    pg_url: str, tmp_path: Path
) -> None:
    stop, restart = _pg_ctl_command("stop", "-m", "fast"), _pg_ctl_command("restart")
    assert stop and restart  # skips here when the server cannot be driven
    # The observer's reads fail at once while the server is away (no retry until it is back).
    driver = PostgresDriver(pg_url, clock=SystemClock(), listen=False, retry_deadline_ms=0)
    log = tmp_path / "worker.log"
    server_down = False
    try:
        enqueued = await driver.enqueue(noop_requests(SystemClock().now_ms(), 600))
        async with worker_process(
            pg_url, log, "--concurrency", "8", "--lease-ms", "3000", "--noop-sleep-ms", "10"
        ):

            async def some_done() -> bool:
                return await done_count(driver) >= 100

            await eventually(some_done, within=60)
            server_down = True
            await pg_ctl("stop", "-m", "fast")  # -w: returns once the server is down
            assert await done_count(driver) == -1  # really away
            await pg_ctl("restart")
            server_down = False

            async def all_done() -> bool:
                return await done_count(driver) == 600

            await eventually(all_done, within=60, every=0.1)
    finally:
        if server_down:
            await pg_ctl("restart")
        await driver.close()
    ran = ids_after("ran ", [log])
    assert sorted(ran) == sorted(r.id for r in enqueued)  # none lost, none twice
