"""Fixtures for the PostgreSQL-only tests: a fresh migrated database and drivers on it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.settle import Settler
from tests.support.postgres import PG_DSN_ENV, fresh_database


@pytest.fixture(autouse=True)
def _needs_postgres() -> None:
    if not os.environ.get(PG_DSN_ENV):
        pytest.skip(f"{PG_DSN_ENV} is not set (.ci/run sets it)")


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


DriverFactory = Callable[..., Awaitable[PostgresDriver]]


@pytest.fixture
async def make_driver(pg_url: str, clock: ManualClock) -> AsyncIterator[DriverFactory]:
    """Drivers on the test's database (each with its own pool), closed at the end."""
    opened: list[PostgresDriver] = []

    async def make(**options: Any) -> PostgresDriver:
        options.setdefault("clock", clock)
        driver = PostgresDriver(pg_url, **options)
        opened.append(driver)
        await driver.migrate()
        return driver

    yield make
    for driver in opened:
        await driver.close()


@pytest.fixture
async def driver(make_driver: DriverFactory) -> PostgresDriver:
    return await make_driver()


@pytest.fixture
def settler(driver: PostgresDriver) -> Settler:
    """The engine's group commit over `driver`: how a worker acks and saves steps."""
    return Settler(driver)


@pytest.fixture
async def sql(pg_url: str) -> AsyncIterator[asyncpg.Connection[asyncpg.Record]]:
    """A plain connection to the test database, for looking under the driver."""
    conn: asyncpg.Connection[asyncpg.Record] = await asyncpg.connect(pg_url)
    try:
        yield conn
    finally:
        await conn.close()
