"""OUTBOX_WRONG_DATABASE on SQLite (a sqlite3 or aiosqlite connection to another file, inside
BEGIN): its fix, run as given (the body of an async function), stages the job through a
connection of the same library on the jobs' file. It was `tx = sqlite3.connect('sqlite:///…')`:
the client's fix context read `sqlite3.connect(path)` as `connect(url)` and wrote its URL in,
which sqlite3 opens as no file (`unable to open database file`)."""

from __future__ import annotations

import ast
import importlib.util
import sqlite3 as stdlib_sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine import JobRegistry, Jobs, connect
from engine.drivers.sqlite.library import sqlite3 as driver_sqlite3
from engine.errors import JobsError
from tests.outbox.test_stage import declare_confirm, published

pytestmark = pytest.mark.drivers("sqlite", reason="SQLite's own outbox refusal")


@pytest.fixture
async def file_jobs(tmp_path: Path) -> AsyncIterator[tuple[Jobs, JobRegistry, Path]]:
    registry = JobRegistry()
    jobs = await connect(f"sqlite:///{tmp_path / 'jobs.db'}", registry=registry)
    try:
        yield jobs, registry, tmp_path
    finally:
        await jobs.close()


async def _run(fix: str, scope: dict[str, Any]) -> None:
    await eval(compile(fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), scope)


async def _refused(jobs: Jobs, tx: Any, confirm: Any) -> str:
    with pytest.raises(JobsError) as caught:
        await jobs.stage(tx, confirm, {"order_id": "o-0"})
    assert (caught.value.code, caught.value.retryable) == ("OUTBOX_WRONG_DATABASE", False)
    return caught.value.fix


async def test_a_sqlite3_connection_to_another_file_gets_a_fix_that_stages(
    file_jobs: tuple[Jobs, JobRegistry, Path],
) -> None:
    jobs, registry, place = file_jobs
    confirm = declare_confirm(registry)
    other = driver_sqlite3.connect(str(place / "other.db"), isolation_level=None)
    try:
        other.execute("BEGIN")
        fix = await _refused(jobs, other, confirm)
    finally:
        other.close()
    assert "sqlite:" not in fix and repr(str(place / "jobs.db")) in fix, fix
    await _run(fix, {"jobs": jobs, "name": confirm, "input": {"order_id": "o-1"}})
    assert await published(jobs) == 1
    assert [j.input["order_id"] for j in (await jobs.list()).jobs] == ["o-1"]


@pytest.mark.skipif(importlib.util.find_spec("aiosqlite") is None, reason="aiosqlite not installed")
@pytest.mark.skipif(
    driver_sqlite3 is not stdlib_sqlite3, reason="the driver refuses aiosqlite on pysqlite3"
)
async def test_an_aiosqlite_connection_to_another_file_gets_aiosqlites_fix(
    file_jobs: tuple[Jobs, JobRegistry, Path],
) -> None:
    import aiosqlite

    jobs, registry, place = file_jobs
    confirm = declare_confirm(registry)
    async with aiosqlite.connect(str(place / "other.db")) as other:
        await other.execute("BEGIN")
        fix = await _refused(jobs, other, confirm)
    assert "sqlite:" not in fix and "aiosqlite.connect(" in fix, fix
    scope = {"jobs": jobs, "name": confirm, "input": {"order_id": "o-1"}, "aiosqlite": aiosqlite}
    await _run(fix, scope)
    assert await published(jobs) == 1
    assert [j.input["order_id"] for j in (await jobs.list()).jobs] == ["o-1"]
