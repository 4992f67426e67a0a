"""`stage(conn, ...)` inside an application transaction that a failed statement has already
aborted (InFailedSQLTransactionError, SQLSTATE 25P02) is OUTBOX_TX_FAILED, terminal: no retry of
the stage can succeed until the application rolls back. It was a retryable DRIVER_UNAVAILABLE.
Once rolled back, the fix runs as given and stages the job."""

from __future__ import annotations

import ast

import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.errors import JobsError
from tests.postgres.builders import request


@pytest.mark.parametrize("first_stage", [True, False])
async def test_a_stage_in_an_aborted_transaction_is_refused_for_good(
    driver: PostgresDriver, clock: ManualClock, pg_url: str, first_stage: bool
) -> None:
    conn = await asyncpg.connect(pg_url)
    try:
        if not first_stage:  # the connection's check of its database is behind it
            async with conn.transaction():
                await driver.outbox_stage(conn, [request(clock.now_ms(), key="earlier")])
        with pytest.raises(ZeroDivisionError):
            async with conn.transaction():
                with pytest.raises(asyncpg.DivisionByZeroError):
                    await conn.execute("SELECT 1/0")  # the app's failed statement, swallowed
                with pytest.raises(JobsError) as raised:
                    await driver.outbox_stage(conn, [request(clock.now_ms())])
                raise ZeroDivisionError  # leaving the block rolls the transaction back
        error = raised.value
        assert (error.code, error.retryable) == ("OUTBOX_TX_FAILED", False)
        assert "25P02" in error.cause and "roll" in error.cause
        assert isinstance(error.__cause__, asyncpg.InFailedSQLTransactionError)
        # The fix, as given, once the failed transaction is gone: the stage goes in.
        code = compile(error.fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        ast.parse(error.fix)

        class Jobs:
            async def stage(self, tx: object, name: str, input: object) -> None:
                await driver.outbox_stage(tx, [request(clock.now_ms(), key="after")])

        await eval(code, {"conn": conn, "jobs": Jobs(), "name": "n", "input": {}})
        staged = await conn.fetchval('SELECT count(*) FROM "mcp_jobs".outbox')
        assert staged == (1 if first_stage else 2)
    finally:
        await conn.close()
