"""The conformance kit's pytest plugin: the fixtures every kit test takes, from a driver URL.

    pytest -p engine.testing.plugin --pyargs engine.testing.kit \\
        --mcp-jobs-driver-url='redis://localhost/0'

`--mcp-jobs-driver-url` may be given more than once (each test runs once per URL); `{tmp}` in it
becomes the test's own temporary directory (`sqlite:///{tmp}/jobs.db`). Each test must start
on an empty database: a server-backed driver overrides the `database_url` fixture to hand out a
fresh one per test. Staging into the outbox needs the application's own transaction, which only
the driver's author knows how to open: override `app_transaction` (memory, SQLite and
PostgreSQL are built in). The kit needs pytest-asyncio with `asyncio_mode = "auto"`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, cast

import pytest

from engine import JobRegistry, Jobs, ManualClock, connect
from engine.drivers import Driver
from engine.drivers.urls import split_schema, sqlite_path
from schemas.stats import WorkerInfo

URL_OPTION = "--mcp-jobs-driver-url"
DEFAULT_URL = "memory://"

# An open application transaction on `driver`'s database, committed when the block ends:
# what `driver.outbox_stage(tx, ...)` is handed.
AppTransaction = Callable[[Driver, str], AbstractAsyncContextManager[Any]]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("mcp-jobs").addoption(
        URL_OPTION,
        action="append",
        default=[],
        metavar="URL",
        help="run the mcp-jobs conformance kit against the driver at URL ({tmp}: the test's "
        f"temporary directory); default {DEFAULT_URL}",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "drivers(*names): run a kit test only on these drivers")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "driver_url" in metafunc.fixturenames:
        urls: list[str] = metafunc.config.getoption(URL_OPTION) or [DEFAULT_URL]
        metafunc.parametrize("driver_url", urls, ids=[url.split(":", 1)[0] for url in urls])


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def registry() -> JobRegistry:
    return JobRegistry()


@pytest.fixture
def database_url(driver_url: str, tmp_path: Any) -> str:
    """A fresh, empty database for this test. Override it for a server-backed driver."""
    return driver_url.replace("{tmp}", str(tmp_path))


@pytest.fixture
async def jobs(database_url: str, clock: ManualClock, registry: JobRegistry) -> AsyncIterator[Jobs]:
    client = await connect(database_url, clock=clock, registry=registry)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def second_jobs(jobs: Jobs, database_url: str, clock: ManualClock) -> AsyncIterator[Jobs]:
    """Another client on the same database, as another process would open it (its own driver,
    an empty registry). Skips when the driver's database lives in one driver instance (memory):
    a presence row written by `jobs` must be visible through it."""
    other = await connect(database_url, clock=clock, registry=JobRegistry())
    try:
        now = clock.now_ms()
        probe = WorkerInfo(
            id="kit-probe",
            hostname="kit",
            pid=0,
            queues=None,
            concurrency=1,
            started_at=now,
            last_seen_at=now,
        )
        await jobs.driver.worker_seen(probe)
        shared = any(w.id == probe.id for w in await other.driver.live_workers(now))
        await jobs.driver.worker_gone(probe.id)
        if not shared:
            pytest.skip(f"two {jobs.driver.kind} drivers share no database")
        yield other
    finally:
        await other.close()


@pytest.fixture
def app_transaction() -> AppTransaction:
    return builtin_app_transaction


@asynccontextmanager
async def builtin_app_transaction(driver: Driver, url: str) -> AsyncIterator[Any]:
    """The application transaction of the built-in drivers; skips the test for any other."""
    if driver.kind == "memory":
        from engine.drivers.memory import MemoryDriver

        memory = cast(MemoryDriver, driver)
        tx = memory.transaction()
        yield tx
        memory.commit(tx)
    elif driver.kind == "sqlite":
        # The driver's own sqlite3 module: another copy of SQLite would release its locks.
        from engine.drivers.sqlite.library import sqlite3

        app = sqlite3.connect(sqlite_path(url), isolation_level=None)
        try:
            app.execute("BEGIN")
            yield app
            app.execute("COMMIT")
        finally:
            app.close()
    elif driver.kind == "postgres":
        import asyncpg

        conn = await asyncpg.connect(split_schema(url)[0])
        try:
            async with conn.transaction():
                yield conn
        finally:
            await conn.close()
    else:
        pytest.skip(
            f"no application transaction for the {driver.kind} driver: override the "
            "app_transaction fixture"
        )
