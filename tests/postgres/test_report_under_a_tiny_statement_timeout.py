"""`mcp-jobs db report` is the fix of a statement timeout (57014): where the sessions' default
`statement_timeout` is tiny (a role's or database's setting, an option of the URL), the report
still answers and shows it, rather than being cancelled itself (INTERNAL, a traceback)."""

from __future__ import annotations

from typing import TypeAlias
from urllib.parse import urlsplit

import asyncpg

from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.report import report
from tests.support.fix_lines import the_line

Sql: TypeAlias = "asyncpg.Connection[asyncpg.Record]"


async def test_the_report_answers_under_a_one_millisecond_statement_timeout(
    driver: PostgresDriver, pg_url: str, sql: Sql
) -> None:
    database = urlsplit(pg_url).path.strip("/")
    await sql.execute(f"ALTER DATABASE \"{database}\" SET statement_timeout = '1ms'")
    found = await report(pg_url, "mcp_jobs", 10.0)
    assert found.reachable
    assert "statement_timeout 1ms" in the_line(found.lines, "settings: ")
    assert the_line(found.lines, "server: PostgreSQL ")
    assert found.lines[-1] == "transactions open: none besides this report's"
