"""stage() handed a connection of another kind than the driver stages through (a sqlite3
connection or an asyncpg pool given to PostgreSQL jobs, a string given to SQLite jobs) is
INVALID_ARGUMENT naming the type given and the kind it takes, with a fix for that case; never
OUTBOX_NO_TX, whose fix (`conn.transaction()`) does not apply. Nothing is staged."""

from __future__ import annotations

import ast
import sqlite3 as std_sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine import JobRegistry, Jobs
from engine.errors import InvalidArgumentError
from tests.outbox.apptx import AppDatabase
from tests.outbox.test_stage import declare_confirm, published


async def _refusal(jobs: Jobs, registry: JobRegistry, given: Any) -> InvalidArgumentError:
    confirm = declare_confirm(registry)
    with pytest.raises(InvalidArgumentError) as caught:
        await jobs.stage(given, confirm, {"order_id": "o-1"})
    assert caught.value.code == "INVALID_ARGUMENT" and caught.value.argument == "tx"
    assert await published(jobs) == 0
    return caught.value


@pytest.mark.drivers("postgres", reason="asyncpg's kinds of connection")
async def test_postgres_names_a_sqlite_connection_and_a_pool(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase, database_url: str, tmp_path: Path
) -> None:
    import asyncpg

    lite = std_sqlite3.connect(tmp_path / "app.db", isolation_level=None)
    lite.execute("BEGIN")
    try:
        refused = await _refusal(jobs, registry, lite)
    finally:
        lite.close()
    assert "sqlite3.Connection" in refused.cause and "asyncpg" in refused.cause
    await _run(refused.fix, jobs, {"asyncpg": asyncpg}, "o-2")

    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    try:
        refused = await _refusal(jobs, registry, pool)
        assert "Pool" in refused.cause and "pool.acquire()" in refused.fix
        await _run(refused.fix, jobs, {"pool": pool}, "o-3")
    finally:
        await pool.close()
    assert sorted(j.input["order_id"] for j in (await jobs.list()).jobs) == ["o-2", "o-3"]


async def _run(fix: str, jobs: Jobs, names: dict[str, Any], order_id: str) -> None:
    """Run `fix` as given (the body of an async function) and publish what it staged."""
    code = compile(fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    input = {"order_id": order_id}
    await eval(code, {"jobs": jobs, "name": "confirm_order", "input": input, **names})
    assert await published(jobs) == 1


@pytest.mark.drivers("sqlite", reason="sqlite3's kind of connection")
async def test_sqlite_names_a_string(
    jobs: Jobs, registry: JobRegistry, app: AppDatabase, database_url: str
) -> None:
    refused = await _refusal(jobs, registry, database_url)
    assert "of type str," in refused.cause and "sqlite3" in refused.cause
    # The fix runs as given (in an async function) and stages the job.
    code = compile(refused.fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    name, input = "confirm_order", {"order_id": "o-2"}
    scope = {"jobs": jobs, "name": name, "input": input}
    await eval(code, scope)
    scope["tx"].close()
    assert await published(jobs) == 1
    assert [j.input for j in (await jobs.list()).jobs] == [input]
