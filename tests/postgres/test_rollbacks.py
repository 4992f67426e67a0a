"""A transaction PostgreSQL rolls back because it met another (a deadlock, a serialization
failure, a lock not granted within lock_timeout) wrote nothing, so the driver runs it again. When
it keeps being rolled back, and for every other refusal that is not a value's, the error's fix is
a psql line that runs as given and shows what to look at, never "mcp-jobs db migrate"."""

from __future__ import annotations

from urllib.parse import urlsplit

import anyio
import asyncpg
import pytest

from engine import ManualClock
from engine.driver_errors import DriverUnavailableError
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.faults import unavailable
from engine.drivers.urls import report_fix
from engine.errors import JobsError
from engine.settle import Settler
from tests.postgres.builders import request
from tests.postgres.conftest import DriverFactory
from tests.postgres.refusals import (
    RETRY_DEADLINE_MS,
    ROLLED_BACK,
    SETTLE_RETRY_MS,
    refuse,
    refused_so_far,
)
from tests.postgres.waiting import CountingClock, eventually, pump
from tests.support.fix_lines import run_fix


@pytest.mark.parametrize("sqlstate", ROLLED_BACK)
async def test_an_enqueue_rolled_back_twice_goes_in_once(
    make_driver: DriverFactory,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    sqlstate: str,
) -> None:
    retry = CountingClock()
    driver = await make_driver(retry_clock=retry, listen=False)
    await refuse(sql, "INSERT", sqlstate, times=2)
    results = []
    done = anyio.Event()

    async def enqueue() -> None:
        results.extend(await driver.enqueue([request(clock.now_ms(), key="once")]))
        done.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(enqueue)
            await pump(retry, done, 50)
    assert await refused_so_far(sql) == 3  # two refusals, then the insert that went in
    (result,) = results
    assert not result.deduped
    stored = await sql.fetch("SELECT id, state FROM mcp_jobs.jobs")
    assert [(r["id"], r["state"]) for r in stored] == [(result.id, "ready")]


async def test_an_ack_rolled_back_by_a_deadlock_is_written_on_the_next_try(
    make_driver: DriverFactory, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    driver = await make_driver(listen=False)
    await driver.enqueue([request(clock.now_ms())])
    (claimed,) = await driver.claim("w", 1, 60_000)
    await refuse(sql, "UPDATE", "40P01", times=1)
    with anyio.fail_after(30):
        await Settler(driver).ack(claimed.record.id, claimed.token, {"ok": True})
    assert await refused_so_far(sql) == 2
    row = await sql.fetchrow("SELECT state, attempt, output FROM mcp_jobs.jobs")
    assert row is not None and dict(row) == {
        "state": "done",
        "attempt": 1,
        "output": '{"ok": true}',
    }


async def test_an_ack_rolled_back_every_time_fails_at_the_retry_deadline_with_a_fix_that_runs(
    make_driver: DriverFactory, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    retry = CountingClock()
    driver = await make_driver(retry_clock=retry, listen=False)
    await driver.enqueue([request(clock.now_ms())])
    (claimed,) = await driver.claim("w", 1, 60_000)
    await refuse(sql, "UPDATE", "40001", times=1_000_000)
    failed: list[BaseException] = []
    over = anyio.Event()

    async def ack() -> None:
        try:
            await Settler(driver).ack(claimed.record.id, claimed.token, {"ok": True})
        except JobsError as exc:
            failed.append(exc)
        over.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ack)
            await eventually(lambda: retry.waiting == 1)
            # A conflict is no outage: the settle is not held, so claims are not held back.
            assert driver.db.retry.holding == 0
            await pump(retry, over, 500)
    # Given up at the deadline of a retry, not after the five minutes a settle is held through
    # an unreachable server.
    assert RETRY_DEADLINE_MS <= retry.now_ms() < SETTLE_RETRY_MS
    (error,) = failed
    assert isinstance(error, DriverUnavailableError) and error.retryable
    assert "rolled the transaction back each time" in error.cause and "40001" in error.cause
    assert error.fix == report_fix(driver.url)
    assert "transactions open" in run_fix(error.fix)
    row = await sql.fetchrow("SELECT state, output FROM mcp_jobs.jobs")
    assert row is not None and dict(row) == {"state": "running", "output": None}


async def _refusal(sql: asyncpg.Connection[asyncpg.Record], sqlstate: str) -> Exception:
    try:
        await sql.execute(
            f"DO $$ BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '{sqlstate}'; END $$"
        )
    except asyncpg.PostgresError as exc:
        return exc
    raise AssertionError(f"SQLSTATE {sqlstate} was not raised")


@pytest.mark.parametrize(
    ("sqlstate", "shows"),
    [
        *((state, "transactions open") for state in ROLLED_BACK),
        ("57014", "statement_timeout 0"),  # a statement timeout cancelled the statement
        ("42501", "on schema mcp_jobs usage yes"),  # the role lacks a privilege: the grants
        ("25006", "default_transaction_read_only off"),  # a standby, or read-only by default
        ("53300", None),  # too many connections: the server is not reachable for now
    ],
)
async def test_each_refusal_that_is_not_a_value_names_a_fix_that_runs(
    driver: PostgresDriver,
    pg_url: str,
    sql: asyncpg.Connection[asyncpg.Record],
    sqlstate: str,
    shows: str | None,
) -> None:
    error = unavailable(await _refusal(sql, sqlstate), pg_url, driver.schema)
    assert error.code == "DRIVER_UNAVAILABLE" and error.retryable
    assert "migrate" not in error.fix
    assert error.fix == report_fix(pg_url)
    output = run_fix(error.fix)
    if shows is not None:
        assert shows in output


def test_the_report_fix_never_carries_the_password() -> None:
    url = "postgresql://app:s3cret@db.example:6432/jobs?sslmode=require&password=other"
    assert report_fix(url) == (
        "mcp-jobs db report --database-url 'postgresql://app@db.example:6432/jobs?sslmode=require'"
    )


async def test_a_claim_rolled_back_by_a_deadlock_claims_on_the_next_try(
    make_driver: DriverFactory, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    driver = await make_driver(listen=False)
    (enqueued,) = await driver.enqueue([request(clock.now_ms())])
    await refuse(sql, "UPDATE", "40P01", times=1)
    with anyio.fail_after(30):
        (claimed,) = await driver.claim("w", 1, 60_000)
    assert claimed.record.id == enqueued.id and claimed.record.attempt == 1
    assert await refused_so_far(sql) == 2


@pytest.mark.parametrize("statement_cache_size", [100, 0], ids=["own-sessions", "pooler"])
async def test_workers_on_a_serializable_database_drain_every_job_once(
    make_driver: DriverFactory,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    statement_cache_size: int,
) -> None:
    """A database whose default isolation is SERIALIZABLE. The driver's sessions run READ
    COMMITTED, which its statements are written for; through a transaction pooler (no statement
    cache, no startup parameters) they keep the default, the server rolls back claims and acks
    that overlap (SQLSTATE 40001), and the retries carry them. Either way no job runs twice."""
    database = await sql.fetchval("SELECT current_database()")
    await sql.execute(
        f'ALTER DATABASE "{database}" SET default_transaction_isolation = serializable'
    )
    driver = await make_driver(listen=False, statement_cache_size=statement_cache_size)
    expected = "read committed" if statement_cache_size else "serializable"
    for borrow in (driver.db.conn, driver.db.planned_once, driver.db.reading_for_values):
        async with borrow() as conn:
            assert await conn.fetchval("SHOW transaction_isolation") == expected
    pool = await driver.db._get_pool()  # pyright: ignore[reportPrivateUsage]
    async with pool.acquire() as pooled:
        assert await pooled.fetchval("SHOW transaction_isolation") == expected
    ids = {
        r.id
        for r in await driver.enqueue([request(clock.now_ms(), key=f"k{n}") for n in range(200)])
    }
    settler = Settler(driver)
    ran: list[str] = []

    async def work(worker: str) -> None:
        while True:
            claimed = await driver.claim(worker, 4, 60_000)
            if not claimed:
                return
            for c in claimed:
                ran.append(c.record.id)
            with anyio.CancelScope(shield=True):
                async with anyio.create_task_group() as acks:
                    for c in claimed:
                        acks.start_soon(settler.ack, c.record.id, c.token, None)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for n in range(6):
                tg.start_soon(work, f"w{n}")
    assert sorted(ran) == sorted(ids)  # each job claimed once
    states = await sql.fetch("SELECT state, count(*) FROM mcp_jobs.jobs GROUP BY state")
    assert [tuple(r) for r in states] == [("done", 200)]


async def test_a_full_disk_on_the_server_is_storage_full_with_a_fix_that_runs(
    driver: PostgresDriver, pg_url: str, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    error = unavailable(await _refusal(sql, "53100"), pg_url, driver.schema)
    assert error.code == "STORAGE_FULL" and error.retryable
    assert "the server's data directory" in error.cause
    assert error.fix == report_fix(pg_url)
    output = run_fix(error.fix)
    # The room the driver's database takes, and the largest ones beside it.
    assert f"database {urlsplit(pg_url).path.strip('/')} (" in output
    assert "databases by size: " in output
