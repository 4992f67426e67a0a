"""A PostgreSQL URL refused before any connection, for a reason other than its `?schema=`, keeps
its fix on the same server. Where the mend is certain, the fix is the URL so written: a schema
named twice over given once, an option with no value or an empty pair left out (its default
taken), the whitespace around a URL read from a file left out, an @ of the user name as %40.
Else the fix says what to correct where the URL was given: a port out of range (its default,
5432, may be another server's), two schemas named (two installs), an sslmode no mode is near.
Each fix pointed at the default SQLite file, a line that ran against an empty local store."""

from __future__ import annotations

import ast
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine import JobRegistry, connect
from engine.drivers import registered_schemes
from engine.drivers.urls import DATABASE_URL_ENV, meant_url, postgres_url_problem
from engine.errors import JobsError
from mcp_jobs.cli import main
from tests.support.fix_lines import command_words, run_fix
from tests.support.postgres import PG_DSN_ENV, fresh_database

SECRET = "s3cretpw"

# (a refused URL, the URL it plainly stands for)
MENDED = [
    ("postgresql://u@h/db?schema=app&schema=app", "postgresql://u@h/db?schema=app"),
    ("postgresql://u@h/db?schema=App&x=1&schema=app", "postgresql://u@h/db?schema=app&x=1"),
    ("postgresql://u@h/db?novalue", "postgresql://u@h/db"),
    ("postgresql://u@h/db?sslmode", "postgresql://u@h/db"),
    ("postgresql://u@h/db?sslmode=&schema=app", "postgresql://u@h/db?schema=app"),
    ("postgresql://u@h/db?a=1&&b=2&", "postgresql://u@h/db?a=1&b=2"),
    ("postgresql://u@h/db\n", "postgresql://u@h/db"),
    ("postgresql://me@corp@h/db", "postgresql://me%40corp@h/db"),
    ("postgresql://u@h/my db", "postgresql://u@h/my%20db"),
    ("postgresql://u@h/db?application_name=100%", "postgresql://u@h/db?application_name=100%25"),
]

# Refused URLs no mend of which is certain.
CORRECTED = [
    "postgresql://u@h:99999/db",
    "postgresql://u@h:0/db",
    "postgresql://u@h:notaport/db",
    "postgresql://u@h1:5432,h2:nope/db",
    "postgresql://u@h/db?port=five",
    "postgresql://u@h/db?schema=a&schema=b",
    "postgresql://u@h/db?sslmode=sometimes",
    "postgresql://u@:5432/db",
    "postgresql://u@[::1/db",
    "postgresql://u@h/db\x01",
    # A mend of a password is never printed (a fix holds none): what to write in it is said.
    f"postgresql://u:{SECRET}@x@h/db",
    f"postgresql://u:{SECRET}%zz@h/db",
    f"postgresql://u:{SECRET} x@h/db",
]


@pytest.mark.parametrize(("url", "meant"), MENDED)
def test_a_refused_url_is_mended_where_the_mend_is_certain(url: str, meant: str) -> None:
    assert postgres_url_problem(url) is not None
    assert meant_url(url, registered_schemes()) == meant
    assert postgres_url_problem(meant) is None


@pytest.mark.parametrize("url", CORRECTED)
def test_a_refused_url_with_no_certain_mend_is_not_guessed(url: str) -> None:
    assert postgres_url_problem(url) is not None
    assert meant_url(url, registered_schemes()) is None


def _no_other_store(fix: str) -> None:
    assert "sqlite" not in fix and ".mcp-jobs" not in fix and SECRET not in fix, fix


@pytest.mark.parametrize("url", CORRECTED)
async def test_connects_fix_says_what_to_correct(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    with pytest.raises(JobsError) as argument:
        await connect(url, registry=JobRegistry())
    monkeypatch.setenv(DATABASE_URL_ENV, url)
    with pytest.raises(JobsError) as variable:
        await connect(registry=JobRegistry())
    for refused in (argument.value, variable.value):
        assert refused.code == "DATABASE_URL_INVALID"
        assert refused.fix.startswith("correct the database URL: "), refused.fix
        _no_other_store(refused.fix)
    assert not (tmp_path / ".mcp-jobs").exists()


@pytest.mark.parametrize("url", CORRECTED)
def test_the_commands_fix_says_what_to_correct_where_the_url_was_given(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    fixes = []
    for argv, where in (
        (["jobs", "stats", "--database-url", url, "--json"], "--database-url"),
        (["jobs", "stats", "--json"], DATABASE_URL_ENV),
    ):
        if where == DATABASE_URL_ENV:
            monkeypatch.setenv(DATABASE_URL_ENV, url)
        code = main(argv)
        error = json.loads(capsys.readouterr().out)["error"]
        assert code == 1 and error["code"] == "DATABASE_URL_INVALID"
        assert error["fix"].startswith(f"correct {where}: "), error["fix"]
        _no_other_store(error["fix"])
        fixes.append(error["fix"].removeprefix(f"correct {where}: "))
    assert fixes[0] == fixes[1]  # one rule says what to correct, wherever the URL came from
    assert not (tmp_path / ".mcp-jobs").exists()


# Refused forms of the test server's URL, and the mended form (a function of the URL).
ON_THE_SERVER = [
    ("{url}?schema=mcp_jobs&schema=mcp_jobs", "{url}?schema=mcp_jobs"),
    ("{url}?novalue", "{url}"),
    ("{url}?application_name=fix&&sslmode=", "{url}?application_name=fix"),
    ("{url}\n", "{url}"),
]

needs_postgres = pytest.mark.skipif(not os.environ.get(PG_DSN_ENV), reason="no PostgreSQL")


@pytest.fixture
async def pg_database() -> AsyncIterator[str]:
    async with fresh_database() as url:
        yield url


@needs_postgres
@pytest.mark.parametrize(("given", "meant"), ON_THE_SERVER)
def test_the_commands_mended_line_runs_on_the_same_database(
    pg_database: str,
    given: str,
    meant: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    refused, mended = given.format(url=pg_database), meant.format(url=pg_database)
    code = main(["jobs", "stats", "--database-url", refused, "--json"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert code == 1 and error["code"] == "DATABASE_URL_INVALID"
    words = command_words(error["fix"])
    assert words[:3] == ["mcp-jobs", "jobs", "stats"], error["fix"]
    assert words[words.index("--database-url") + 1] == mended, error["fix"]
    stats = json.loads(run_fix(error["fix"]))  # from another directory
    assert "total" in json.dumps(stats), stats
    # Given by the variable, the fix exports the mended URL: the command then runs on it.
    monkeypatch.setenv(DATABASE_URL_ENV, refused)
    assert main(["jobs", "stats", "--json"]) == 1
    fix = json.loads(capsys.readouterr().out)["error"]["fix"]
    assert command_words(fix)[0] == "export", fix
    json.loads(run_fix(f"{fix} && mcp-jobs jobs stats --json"))
    assert not (tmp_path / ".mcp-jobs").exists()


@needs_postgres
@pytest.mark.parametrize(("given", "meant"), ON_THE_SERVER)
async def test_connects_mended_line_connects_to_the_same_database(
    pg_database: str, given: str, meant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    refused, mended = given.format(url=pg_database), meant.format(url=pg_database)
    with pytest.raises(JobsError) as raised:
        await connect(refused, registry=JobRegistry())
    assert raised.value.code == "DATABASE_URL_INVALID"
    fix = raised.value.fix
    assert fix == f"jobs = await connect({mended!r})", fix
    scope: dict[str, Any] = {"connect": connect}
    await eval(compile(fix, "fix", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), scope)
    jobs = scope["jobs"]
    try:
        assert (await jobs.stats()) is not None
    finally:
        await jobs.close()
    assert not (tmp_path / ".mcp-jobs").exists()
