"""The driver's own connections: up to three kept out of the pool and reused without its
bookkeeping; the pool beyond them; a connection whose session state is unknown never reused."""

from __future__ import annotations

import anyio
import asyncpg
import pytest

from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.schema_version import Conn
from engine.testing.blocked import wait_all_tasks_blocked


async def backend_pid(conn: Conn) -> int:
    pid: int = await conn.fetchval("SELECT pg_backend_pid()")
    return pid


async def test_three_concurrent_operations_use_own_connections_and_a_fourth_the_pool(
    driver: PostgresDriver,
) -> None:
    holding, all_in = anyio.Event(), anyio.Event()
    entered: list[int] = []

    async def hold() -> None:
        async with driver.db.conn() as conn:
            entered.append(await backend_pid(conn))
            if len(entered) == 4:
                all_in.set()
            await holding.wait()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(hold)
            await all_in.wait()
            assert len(set(entered)) == 4
            assert len(driver.db.general.all) == 3 and driver.db.pool is not None
            holding.set()
    # Given back clean: the next lone operations reuse them, no new connection is made.
    async with driver.db.conn() as conn:
        assert await backend_pid(conn) in entered
    assert len(driver.db.general.all) == 3


async def test_a_connection_left_inside_a_transaction_is_closed_not_reused(
    driver: PostgresDriver,
) -> None:
    async with driver.db.conn() as conn:
        left = await backend_pid(conn)
        await conn.execute("BEGIN")
    async with driver.db.conn() as conn:
        assert await backend_pid(conn) != left
        assert not conn.is_in_transaction()


async def test_an_error_between_statements_keeps_the_connection(driver: PostgresDriver) -> None:
    # A refused duplicate or an invalid batch item is raised with the session in good order:
    # reconnecting after each would cost more than the statement.
    with pytest.raises(KeyError):
        async with driver.db.conn() as conn:
            kept = await backend_pid(conn)
            raise KeyError("the caller's own refusal, between statements")
    async with driver.db.conn() as conn:
        assert await backend_pid(conn) == kept


async def test_a_cancelled_statement_closes_its_connection(driver: PostgresDriver) -> None:
    pids: list[int] = []
    asked = anyio.Event()

    async def sleep_on_the_server() -> None:
        async with driver.db.conn() as conn:
            pids.append(await backend_pid(conn))
            asked.set()
            await conn.execute("SELECT pg_sleep(30)")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sleep_on_the_server)
            await asked.wait()
            await wait_all_tasks_blocked()  # the sleep is on the server
            tg.cancel_scope.cancel()
    async with driver.db.conn() as conn:
        assert await backend_pid(conn) != pids[0]


async def test_close_ends_free_and_busy_own_connections(driver: PostgresDriver) -> None:
    async with driver.db.conn() as first, driver.db.conn() as second:
        assert first is not second
    async with driver.db.conn() as busy:
        free = first if busy is second else second
        await driver.close()
        with pytest.raises(asyncpg.InterfaceError):
            await backend_pid(busy)  # terminated under the operation in flight
    assert free.is_closed() and busy.is_closed()
    assert driver.db.general.all == set() and driver.db.general.free == []
