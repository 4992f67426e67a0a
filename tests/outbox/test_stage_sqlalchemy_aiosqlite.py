"""stage() handed a SQLAlchemy connection or session, or an aiosqlite connection: the job must
be staged inside the application's SAME transaction (the outbox's whole point), so

- a SQLAlchemy object is refused with a fix that reaches the driver connection under it
  (`await conn.get_raw_connection()` → `.driver_connection`), never one that opens a new
  transaction (not atomic with the app's write) or, on SQLite, a new connection that would
  wait on the event loop for the app's own write lock;
- an aiosqlite connection is taken as it is on SQLite: the rows go through its own thread into
  its open transaction, and exist exactly when it commits.

The tests that need SQLAlchemy or aiosqlite skip, saying so, where they are not installed."""

from __future__ import annotations

import ast
import importlib.util
import sqlite3 as stdlib_sqlite3
from typing import Any

import pytest

from engine import JobRegistry, Jobs
from engine.drivers.sqlite.library import sqlite3 as driver_sqlite3
from engine.errors import InvalidArgumentError, JobsError
from tests.outbox.apptx import SQLITE_PREFIX
from tests.outbox.test_stage import declare_confirm, published

_NO_SQLALCHEMY = importlib.util.find_spec("sqlalchemy") is None
_NO_AIOSQLITE = importlib.util.find_spec("aiosqlite") is None
# The driver on pysqlite3 (this Python's SQLite too old; tests/sqlite/test_library.py runs these
# there): aiosqlite's connections are the stdlib's, which the driver refuses (two SQLite copies
# on one file in one process release each other's locks).
_FALLBACK = driver_sqlite3 is not stdlib_sqlite3


def _posing_as(module: str, name: str) -> Any:
    """An object whose type says it is `module.name` (the refusal reads only the type)."""
    return type(name, (), {"__module__": module})()


_SHAPES = {
    ("sqlalchemy.ext.asyncio.engine", "AsyncConnection"): "await conn.get_raw_connection()",
    ("sqlalchemy.ext.asyncio.session", "AsyncSession"): "await session.connection()",
}


@pytest.mark.drivers("postgres", "sqlite", reason="the SQL drivers stage through a connection")
@pytest.mark.parametrize(("module", "name"), list(_SHAPES))
async def test_a_sqlalchemy_object_gets_a_fix_in_the_same_transaction(
    jobs: Jobs, registry: JobRegistry, module: str, name: str
) -> None:
    confirm = declare_confirm(registry)
    with pytest.raises(InvalidArgumentError) as caught:
        await jobs.stage(_posing_as(module, name), confirm, {"order_id": "o-1"})
    refused = caught.value
    assert (refused.code, refused.retryable, refused.argument) == ("INVALID_ARGUMENT", False, "tx")
    ast.parse(refused.fix)
    assert _SHAPES[(module, name)] in refused.fix
    assert "raw.driver_connection" in refused.fix
    # Nothing in it opens a transaction or a connection of its own.
    for opening in ("transaction()", "connect(", "BEGIN", "create_pool"):
        assert opening not in refused.fix
    assert await published(jobs) == 0


async def _refused_on_fallback(conn: Any, jobs: Jobs, name: str) -> None:
    """On pysqlite3, the raw aiosqlite connection the fix reaches is refused: stdlib SQLite."""
    raw = await conn.get_raw_connection()
    with pytest.raises(JobsError) as refused:
        await jobs.stage(raw.driver_connection, name, {"order_id": "o-1"})
    assert (refused.value.code, refused.value.retryable) == ("OUTBOX_OTHER_SQLITE", False)


async def _sqlalchemy_engine(database_url: str) -> Any:
    from sqlalchemy.ext.asyncio import create_async_engine

    if database_url.startswith(SQLITE_PREFIX):
        return create_async_engine("sqlite+aiosqlite:///" + database_url[len(SQLITE_PREFIX) :])
    return create_async_engine("postgresql+asyncpg://" + database_url.split("://", 1)[1])


@pytest.mark.skipif(_NO_SQLALCHEMY, reason="SQLAlchemy is not installed in this environment")
@pytest.mark.drivers("postgres", "sqlite", reason="SQLAlchemy over asyncpg or aiosqlite")
@pytest.mark.parametrize("commit", [True, False])
async def test_the_sqlalchemy_fix_stages_in_the_apps_transaction(
    jobs: Jobs, registry: JobRegistry, database_url: str, commit: bool
) -> None:
    if database_url.startswith(SQLITE_PREFIX) and _NO_AIOSQLITE:
        pytest.skip("aiosqlite is not installed in this environment")
    from sqlalchemy import text

    confirm = declare_confirm(registry)
    engine = await _sqlalchemy_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE IF NOT EXISTS app_orders (id text PRIMARY KEY)"))
        try:
            async with engine.begin() as conn:
                await conn.execute(text("INSERT INTO app_orders (id) VALUES ('o-1')"))
                with pytest.raises(InvalidArgumentError) as caught:
                    await jobs.stage(conn, confirm, {"order_id": "o-1"})
                if _FALLBACK and database_url.startswith(SQLITE_PREFIX):
                    await _refused_on_fallback(conn, jobs, confirm.name)
                    return
                code = compile(
                    caught.value.fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
                )
                scope = {"conn": conn, "jobs": jobs, "name": confirm.name}
                await eval(code, {**scope, "input": {"order_id": "o-1"}})
                if not commit:
                    raise LookupError("the app's write fails after the stage")
        except LookupError:
            pass
        async with engine.connect() as conn:
            orders = (await conn.execute(text("SELECT count(*) FROM app_orders"))).scalar()
    finally:
        await engine.dispose()
    # The job exists exactly when the app's write does.
    assert orders == (1 if commit else 0)
    assert await published(jobs) == orders


@pytest.mark.skipif(_NO_AIOSQLITE, reason="aiosqlite is not installed in this environment")
@pytest.mark.drivers("sqlite", reason="aiosqlite is SQLite's")
@pytest.mark.parametrize("commit", [True, False])
async def test_an_aiosqlite_connection_stages_in_its_own_transaction(
    jobs: Jobs, registry: JobRegistry, database_url: str, commit: bool
) -> None:
    aiosqlite = importlib.import_module("aiosqlite")  # untyped, and optional
    confirm = declare_confirm(registry)
    path = database_url[len(SQLITE_PREFIX) :]
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await conn.execute("CREATE TABLE IF NOT EXISTS app_orders (id TEXT PRIMARY KEY)")
        if _FALLBACK:
            await conn.execute("BEGIN IMMEDIATE")
            with pytest.raises(JobsError) as refused:
                await jobs.stage(conn, confirm, {"order_id": "o-1"})
            assert (refused.value.code, refused.value.retryable) == ("OUTBOX_OTHER_SQLITE", False)
            await conn.rollback()
            assert await published(jobs) == 0
            return
        with pytest.raises(JobsError) as caught:
            await jobs.stage(conn, confirm, {"order_id": "o-0"})  # no transaction yet
        assert caught.value.code == "OUTBOX_NO_TX"
        # Its fix, as given: a transaction of the connection's own around the stage.
        code = compile(caught.value.fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        scope = {"conn": conn, "jobs": jobs, "name": confirm.name}
        await eval(code, {**scope, "input": {"order_id": "o-0"}})
        assert not conn.in_transaction
        await conn.execute("BEGIN IMMEDIATE")
        await conn.execute("INSERT INTO app_orders (id) VALUES ('o-1')")
        staged = await jobs.stage(conn, confirm, {"order_id": "o-1"})
        await (conn.commit() if commit else conn.rollback())
        (count,) = await conn.execute_fetchall("SELECT count(*) FROM app_orders")
    assert count[0] == (1 if commit else 0)
    assert await published(jobs) == 1 + count[0]  # the fix's job, and the order's if committed
    if commit:
        assert (await jobs.get(staged.job_id)).input == {"order_id": "o-1"}
