"""A PostgreSQL install outside the default schema is named by its URL (`?schema=NAME`): the
driver, the CLI and every fix line reach it, and a driver given `schema=` prints URLs that name
it, so its fix lines act on its tables rather than the default schema's."""

from __future__ import annotations

from typing import cast

import anyio
import asyncpg
import pytest

from engine import ManualClock
from engine.drivers import open_driver
from engine.drivers.postgres import PostgresDriver
from engine.drivers.urls import SCHEMA_PARAM, migrate_fix, naming
from engine.errors import JobsError
from tests.postgres.builders import request
from tests.support.fix_lines import report_lines, run_fix, the_line
from tests.support.postgres import fresh_database


async def _tables(url: str, schema: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
    finally:
        await conn.close()
    return {row["tablename"] for row in rows}


async def test_a_url_naming_a_schema_keeps_its_jobs_there(clock: ManualClock) -> None:
    async with fresh_database(migrated=False) as url:
        named = naming(url, SCHEMA_PARAM, "tenant_a")
        # The CLI's road: the URL is all it has.
        await anyio.to_thread.run_sync(lambda: run_fix(migrate_fix(named)))
        assert "jobs" in await _tables(url, "tenant_a")
        assert not await _tables(url, "mcp_jobs")
        driver = cast(PostgresDriver, open_driver(named, clock=clock, listen=False))
        try:
            assert driver.schema == "tenant_a" and driver.url == named
            (made,) = await driver.enqueue([request(clock.now_ms(), key="k")])
            assert [c.record.id for c in await driver.claim("w", 5, 1000)] == [made.id]
        finally:
            await driver.close()
        lines = await report_lines(named)
        assert the_line(lines, "schema tenant_a: ").startswith("schema tenant_a: version ")


async def test_a_schema_given_to_the_driver_is_the_one_its_fix_lines_migrate(
    clock: ManualClock,
) -> None:
    async with fresh_database(migrated=False) as url:
        driver = PostgresDriver(url, clock=clock, listen=False, schema="tenant_b")
        try:
            assert driver.url == naming(url, SCHEMA_PARAM, "tenant_b")
            with pytest.raises(JobsError) as raised:
                await driver.get("x")
            error = raised.value
            assert error.code == "DRIVER_UNAVAILABLE" and "tenant_b" in error.cause
            assert error.fix == migrate_fix(driver.url)
            await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
            with pytest.raises(JobsError) as missing:
                await driver.get("x")
            assert missing.value.code == "JOB_NOT_FOUND"  # its schema is there now
            lines = (await driver.server_report()).lines
            assert the_line(lines, "schema tenant_b: ").startswith("schema tenant_b: version ")
        finally:
            await driver.close()
        assert not await _tables(url, "mcp_jobs")


def test_the_option_wins_over_the_url_and_the_default_adds_nothing() -> None:
    base = "postgresql://app@db.example/jobs?sslmode=disable"
    assert PostgresDriver(base).url == base
    assert PostgresDriver(base, schema="mcp_jobs").url == base
    named = naming(base, SCHEMA_PARAM, "tenant_c")
    assert PostgresDriver(named).schema == "tenant_c"
    chosen = PostgresDriver(named, schema="tenant_d")
    assert chosen.schema == "tenant_d"
    assert chosen.url == "postgresql://app@db.example/jobs?sslmode=disable&schema=tenant_d"
    # asyncpg is never handed the option (it would send it to the server as a setting).
    assert chosen.db.dsn == base
