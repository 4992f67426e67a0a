"""Backends terminated under the driver (`pg_terminate_backend`) while the server stays up.

A connection the server ended is closed, never handed out again mid-protocol, and every call
that is safe to repeat (enqueues, reads, claims, fenced settles) goes through on a fresh one.
The kills follow the workload's progress, not the clock: one after every few calls, landing
mid-call.
"""

from __future__ import annotations

from collections.abc import Awaitable
from contextlib import AsyncExitStack
from typing import TypeVar

import anyio
import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.schema_version import Conn
from engine.errors import JobsError
from engine.settle import Settler
from schemas.jobs import EnqueueResult
from tests.postgres.builders import request
from tests.postgres.conftest import DriverFactory

T = TypeVar("T")
LEASE_MS = 30_000
ROUNDS = 80
KILL_EVERY = 2  # calls between two kills

TERMINATE = """
SELECT count(pg_terminate_backend(pid))
  FROM pg_stat_activity
 WHERE datname = current_database() AND application_name = 'mcp-jobs' AND pid <> pg_backend_pid()
"""


def broken_mid_protocol(exc: BaseException) -> bool:
    """A call that failed because a connection was reused after it broke."""
    cause = exc.__cause__
    return isinstance(cause, (asyncpg.InternalClientError, asyncpg.InterfaceError))


@pytest.mark.slow
async def test_calls_ride_out_terminated_backends_and_no_job_is_lost_or_doubled(
    make_driver: DriverFactory, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    driver: PostgresDriver = await make_driver(listen=False)
    calls = 0
    kick = anyio.Event()
    done = False
    failures: list[JobsError] = []
    results: dict[str, list[EnqueueResult]] = {}
    acked: set[str] = set()

    def called() -> None:
        nonlocal calls, kick
        calls += 1
        if calls % KILL_EVERY == 0:
            kick.set()

    async def killer() -> None:
        nonlocal kick
        while not done:
            await kick.wait()
            kick = anyio.Event()
            await sql.fetchval(TERMINATE)

    async def call(op: Awaitable[T]) -> T | None:
        try:
            return await op
        except JobsError as exc:
            failures.append(exc)
            return None
        finally:
            called()

    async def workload() -> None:
        nonlocal done
        try:
            for n in range(ROUNDS):
                now = clock.now_ms()
                one = await call(driver.enqueue([request(now, key=f"k{n}")]))
                if isinstance(one, list):
                    results.setdefault(f"k{n}", []).extend(one)
                # A batch: a new key, and the key just enqueued again (it dedupes to it).
                batch = [request(now, key=f"b{n}"), request(now, key=f"k{n}")]
                two = await call(driver.enqueue(batch))
                if isinstance(two, list):
                    results.setdefault(f"b{n}", []).append(two[0])
                    results.setdefault(f"k{n}", []).append(two[1])
                await call(driver.stats())
                if isinstance(one, list):
                    await call(driver.get(one[0].id))
                claimed = await call(driver.claim("w", 2, LEASE_MS))
                for job in claimed if isinstance(claimed, list) else []:
                    await call(Settler(driver).ack(job.record.id, job.token, {"n": n}))
                    acked.add(job.record.id)
        finally:
            done = True
            kick.set()

    with anyio.fail_after(45):
        async with anyio.create_task_group() as tg:
            tg.start_soon(killer)
            tg.start_soon(workload)

    assert [f for f in failures if broken_mid_protocol(f)] == []
    assert failures == []  # enqueues, reads, claims and acks all went through

    # Every key is one job, answered with the same id each time; only a repeat is deduped.
    rows = await sql.fetch("SELECT id, idempotency_key FROM mcp_jobs.jobs")
    assert sorted(r["idempotency_key"] for r in rows) == sorted(results)
    by_key = {r["idempotency_key"]: r["id"] for r in rows}
    for key, answers in results.items():
        assert {a.id for a in answers} == {by_key[key]}
        assert [a.deduped for a in answers] == [False] + [True] * (len(answers) - 1)

    # Nothing lost: what is left (a claim whose answer was lost in a kill leased its rows to
    # nobody) is claimed and acked once those leases run out.
    clock.advance(LEASE_MS)
    while claimed := await driver.claim("w", 100, LEASE_MS):
        for job in claimed:
            await Settler(driver).ack(job.record.id, job.token, None)
    states = await sql.fetch("SELECT state, count(*) FROM mcp_jobs.jobs GROUP BY state")
    assert {r["state"]: r["count"] for r in states} == {"done": len(results)}
    assert acked <= set(by_key.values())


async def backend_pid(conn: Conn) -> int:
    pid: int = await conn.fetchval("SELECT pg_backend_pid()")
    return pid


@pytest.mark.parametrize("pooled", [False, True])
async def test_a_connection_that_broke_is_never_handed_out_again(
    driver: PostgresDriver, pooled: bool
) -> None:
    """The session ended under an operation: asyncpg raises before it has seen the socket close,
    so the connection still looks open. Reused, it fails mid-protocol ("another operation is in
    progress"); it must be closed instead, whether it was one of the driver's own or pooled."""
    async with AsyncExitStack() as own:
        if pooled:  # the driver's own connections are all busy: the next comes from the pool
            for _ in range(3):
                await own.enter_async_context(driver.db.conn())
        with pytest.raises(JobsError) as raised:
            async with driver.db.conn() as conn:
                broke = await backend_pid(conn)
                raise asyncpg.ConnectionDoesNotExistError("terminating connection")
        assert raised.value.code == "DRIVER_UNAVAILABLE"
        async with driver.db.conn() as conn:
            assert await backend_pid(conn) != broke
