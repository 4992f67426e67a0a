"""A `?schema=` no schema name can be is mended to the name read from it (`schema_meant`), or
left out (the default schema of the same database) where none can be read: never another
database, which the fix of `a;drop` or `1app` was (the default SQLite file). A fix's
`connect(url)` is the client's; a database library's `sqlite3.connect(path)` or
`asyncpg.connect(dsn)` is left as written (the client's URL written into it opened no file)."""

from __future__ import annotations

import pytest

from engine.drivers import registered_schemes
from engine.drivers.urls import SCHEMA_NAME, meant_url, postgres_url_problem, schema_meant
from engine.fix_lines import CommandContext


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("a;drop", "a_drop"),
        ("a%3Bdrop", "a_drop"),  # as a URL may carry it
        ("1app", "_1app"),
        ("My App.v2", "my_app_v2"),
        ("x" * 70, "x" * 58),
        ("%zz", "_zz"),
        (";;", ""),
        ("日本", ""),
    ],
)
def test_a_schema_no_name_can_be_is_read_as_one_or_left_out(given: str, meant: str) -> None:
    url = f"postgresql://u@h/db?schema={given}&sslmode=require"
    assert postgres_url_problem(url) is not None
    expected = f"postgresql://u@h/db?schema={meant}&sslmode=require" if meant else None
    expected = expected or "postgresql://u@h/db?sslmode=require"
    assert meant_url(url, registered_schemes()) == expected
    assert postgres_url_problem(expected) is None


@pytest.mark.parametrize("value", ["App-1", "a;drop", "1app", "-", "x" * 90, "ä"])
def test_schema_meant_is_a_schema_name_or_none(value: str) -> None:
    named = schema_meant(value)
    assert named == "" or SCHEMA_NAME.fullmatch(named)


@pytest.mark.parametrize(
    "fix",
    [
        "from engine.drivers.sqlite import sqlite3; tx = sqlite3.connect('/a/jobs.db')",
        "tx = await asyncpg.connect('postgresql://u@h/db')",
        "async with aiosqlite.connect('/a/jobs.db') as tx: pass",
    ],
)
def test_a_librarys_connect_in_a_fix_is_left_as_written(fix: str) -> None:
    context = CommandContext("sqlite:////b/jobs.db")
    assert context.connect_line(fix) == fix


def test_the_clients_connect_in_a_fix_is_this_clients() -> None:
    context = CommandContext("sqlite:////b/jobs.db")
    assert context.connect_line("jobs = await connect(url)") == (
        "jobs = await connect('sqlite:////b/jobs.db')"
    )
