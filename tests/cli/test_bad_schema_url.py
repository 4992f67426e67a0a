"""A PostgreSQL URL whose `?schema=` no schema name can be (`a;drop`, `1app`, `;;`) is refused
before any connection, and its fix, run as given, reaches the SAME database: the schema read
from the one given (`a_drop`, `_1app`), or none (the default schema) where no name can be read.
The fix was the default SQLite file (`connect('sqlite:///.mcp-jobs/jobs.db')`, `--database-url
sqlite:////…/.mcp-jobs/jobs.db`): a line that ran against an empty local store instead."""

from __future__ import annotations

import ast
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from engine import JobRegistry, connect
from engine.drivers.urls import split_schema
from engine.errors import JobsError
from mcp_jobs.cli import main
from tests.support.fix_lines import command_words, run_fix
from tests.support.postgres import PG_DSN_ENV, base_dsn, fresh_database

pytestmark = pytest.mark.skipif(not os.environ.get(PG_DSN_ENV), reason="no PostgreSQL")

# The schema given, and the one its fix names (None: the option left out).
_SCHEMAS = [("a;drop", "a_drop"), ("1app", "_1app"), (";;", None)]


@pytest.fixture
async def pg_database() -> AsyncIterator[str]:
    async with fresh_database(migrated=False) as url:
        yield url


def _with_schema(url: str, schema: str | None) -> str:
    return url if schema is None else f"{url}?schema={schema}"


@pytest.mark.parametrize(("given", "meant"), _SCHEMAS)
async def test_connects_fix_connects_to_the_same_database(
    pg_database: str, given: str, meant: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCP_JOBS_DATABASE_URL", raising=False)
    with pytest.raises(JobsError) as raised:
        await connect(f"{pg_database}?schema={given}", registry=JobRegistry())
    assert raised.value.code == "DATABASE_URL_INVALID"
    fix = raised.value.fix
    assert fix == f"jobs = await connect({_with_schema(pg_database, meant)!r})", fix
    scope: dict[str, Any] = {"connect": connect}
    await eval(compile(fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), scope)
    await scope["jobs"].close()
    assert not (tmp_path / ".mcp-jobs").exists()  # no SQLite store made
    conn = await asyncpg.connect(split_schema(pg_database)[0])
    try:
        schemas = await conn.fetch("SELECT nspname FROM pg_namespace")
    finally:
        await conn.close()
    assert (meant or "mcp_jobs") in {row["nspname"] for row in schemas}


@pytest.mark.parametrize(("given", "meant"), _SCHEMAS)
def test_db_reports_fix_reports_on_the_same_database(
    given: str,
    meant: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCP_JOBS_DATABASE_URL", raising=False)
    pg_database = base_dsn()  # a report only reads: no database of its own needed
    url = f"{pg_database}?schema={given}"
    code = main(["db", "report", "--database-url", url, "--json"])
    envelope = json.loads(capsys.readouterr().out)
    assert code == 1 and envelope["error"]["code"] == "DATABASE_URL_INVALID"
    fix = envelope["error"]["fix"]
    words = command_words(fix)
    assert words[:3] == ["mcp-jobs", "db", "report"], fix
    assert words[words.index("--database-url") + 1] == _with_schema(pg_database, meant), fix
    report = json.loads(run_fix(fix))  # from another directory
    assert report["ok"] is True and report["driver"] == "postgres", report
    assert report["database"] == _with_schema(pg_database, meant)
