"""The scheduler's tests that must hold on every store the project ships, Redis and NATS too:
`any_jobs` is a client on a fresh database of each kind (a kind whose server is not configured
is skipped, as in its own suite), and the helpers reach into each driver the way another
program, or a dying process, would."""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from engine import JobRegistry, Jobs, ManualClock, connect
from engine.drivers.memory import MemoryDriver

KINDS = ("memory", "sqlite", "postgres", "redis", "nats")
PG_DSN_ENV = "MCP_JOBS_TEST_PG_DSN"
REDIS_URL_ENV = "MCP_JOBS_TEST_REDIS_URL"
NATS_URL_ENV = "MCP_JOBS_TEST_NATS_URL"


class Killed(Exception):
    """The scheduler's process dies here (SIGKILL, the OOM killer, a deploy)."""


@asynccontextmanager
async def fresh_url(kind: str, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh, empty database of `kind`, removed afterwards."""
    if kind == "memory":
        yield "memory://"
    elif kind == "sqlite":
        yield f"sqlite:///{tmp_path}/jobs.db"
    elif kind == "postgres":
        if not os.environ.get(PG_DSN_ENV):
            pytest.skip(f"{PG_DSN_ENV} is not set (.ci/run sets it)")
        from tests.support.postgres import fresh_database

        async with fresh_database() as url:
            yield url
    elif kind == "redis":
        async with _redis_prefix() as url:
            yield url
    else:
        async with _nats_bucket() as url:
            yield url


@asynccontextmanager
async def _redis_prefix() -> AsyncIterator[str]:
    base = os.environ.get(REDIS_URL_ENV)
    if not base:
        pytest.skip(f"{REDIS_URL_ENV} is not set (.ci/run sets it)")
    redis = pytest.importorskip("redis.asyncio", reason="the redis extra is not installed")
    prefix = f"mcp-jobs-test:{secrets.token_hex(6)}:"
    yield f"{base}{'&' if '?' in base else '?'}prefix={prefix}"
    client = redis.Redis.from_url(base, decode_responses=True)
    try:
        doomed = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        if doomed:
            await client.unlink(*doomed)
    finally:
        await client.aclose()


@asynccontextmanager
async def _nats_bucket() -> AsyncIterator[str]:
    base = os.environ.get(NATS_URL_ENV)
    if not base:
        pytest.skip(f"{NATS_URL_ENV} is not set (.ci/run sets it)")
    pytest.importorskip("nats", reason="the nats extra is not installed")
    import nats
    import nats.js.errors

    bucket = f"mcpjobs_test_{secrets.token_hex(6)}"
    yield f"{base.rstrip('/')}/{bucket}"
    client = await nats.connect(base)
    try:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await client.jetstream().delete_key_value(bucket)
    finally:
        await client.close()


@pytest.fixture(params=KINDS)
async def any_jobs(
    request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock, registry: JobRegistry
) -> AsyncIterator[Jobs]:
    async with fresh_url(request.param, tmp_path) as url:
        jobs = await connect(url, clock=clock, registry=registry)
        try:
            yield jobs
        finally:
            await jobs.close()


def kind_of(jobs: Jobs) -> str:
    driver = jobs.driver
    if isinstance(driver, MemoryDriver):
        return "memory"
    return type(driver).__module__.split(".")[2]  # engine.drivers.<kind>.driver


def inserts_die(patch: pytest.MonkeyPatch, jobs: Jobs, death: Callable[[], Exception]) -> None:
    """Make every insert of jobs through `jobs`'s driver raise `death()` before it writes a job:
    the process dies there, or the store refuses (locked, connection lost). Patched where each
    driver inserts, so whatever writes its jobs (an enqueue, a task's firing) meets it."""

    async def dies(*args: Any, **kwargs: Any) -> Any:
        raise death()

    def dies_now(*args: Any, **kwargs: Any) -> Any:
        raise death()

    kind = kind_of(jobs)
    if kind == "memory":
        patch.setattr(jobs.driver, "enqueue", dies)
    elif kind == "sqlite":
        from engine.drivers.sqlite import lifecycle

        patch.setattr(lifecycle, "enqueue", dies_now)
    elif kind == "postgres":
        enqueuer = jobs.driver.enqueuer  # type: ignore[attr-defined]
        patch.setattr(enqueuer, "_insert", dies)
        patch.setattr(enqueuer, "_insert_one", dies)
    elif kind == "redis":
        from engine.drivers.redis import enqueue as redis_enqueue

        patch.setattr(redis_enqueue, "ENQUEUE_SCRIPT", dies)
    else:
        from engine.drivers.nats import enqueue as nats_enqueue

        patch.setattr(nats_enqueue, "enqueue", dies)


def state_spoiler(jobs: Jobs, tmp_path: Path) -> Callable[[str], Awaitable[None]]:
    """What makes a task's stored state read as none on `jobs`'s driver: another program's
    value where the store can hold one (SQLite, Redis, NATS), else the row removed."""
    kind = kind_of(jobs)
    driver: Any = jobs.driver

    async def spoil(task: str) -> None:
        if kind == "memory":
            driver._tasks.pop(task)
        elif kind == "sqlite":
            conn = sqlite3.connect(f"{tmp_path}/jobs.db", isolation_level=None)
            try:
                conn.execute(
                    "UPDATE mcp_jobs_scheduler_state SET last_fired_at = 'oops' WHERE task = ?",
                    (task,),
                )
            finally:
                conn.close()
        elif kind == "postgres":
            # Its typed columns hold no other program's value: the row removed reads as none too.
            async with driver.db.conn() as conn:
                sql = f"DELETE FROM {driver.schema}.scheduler_state WHERE task = $1"
                await conn.execute(sql, task)
        elif kind == "redis":
            await driver._store.client.hset(driver._store.keys.tasks, task, "oops")
        else:
            from engine.drivers.nats import keys

            store = await driver._open()
            await store.kv.put(keys.task(task), b"not json")

    return spoil
