"""`mcp-jobs db report` on PostgreSQL, run as the fix lines print it (tests/support/fix_lines.py:
from a scratch directory, with no psql on the PATH): what it shows of a healthy database, of a
session holding another up, of a role without grants, of a schema never installed, and of a
server that refuses the session (one that does not answer: test_errors.py)."""

from __future__ import annotations

from typing import TypeAlias
from urllib.parse import urlsplit
from uuid import uuid4

import anyio
import asyncpg

from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.sql import latest_version
from engine.drivers.urls import migrate_fix
from tests.postgres.waiting import eventually
from tests.support.fix_lines import report_lines, run_fix, the_line
from tests.support.postgres import fresh_database

Sql: TypeAlias = "asyncpg.Connection[asyncpg.Record]"


async def test_a_healthy_database_shows_where_it_is_its_settings_and_its_schema(
    driver: PostgresDriver, pg_url: str, sql: Sql
) -> None:
    database = urlsplit(pg_url).path.strip("/")
    await sql.execute(f"ALTER DATABASE \"{database}\" SET statement_timeout = '7s'")
    lines = await report_lines(pg_url)
    assert f"database {database} (" in the_line(lines, "server: PostgreSQL ")
    assert the_line(lines, "recovery: ") == "recovery: none (a primary: writes go through)"
    assert "statement_timeout 7s" in the_line(lines, "settings: ")
    assert "default_transaction_read_only off" in the_line(lines, "settings: ")
    # The server runs on this machine: one clock.
    assert the_line(lines, "clock: ").startswith(
        "clock: this machine's clock agrees with the database server's ("
    )
    version = latest_version()
    assert (
        the_line(lines, "schema mcp_jobs: ")
        == f"schema mcp_jobs: version {version}, this package's"
    )
    assert the_line(lines, "privileges of ").endswith(
        "on schema mcp_jobs usage yes, create yes; "
        "on mcp_jobs.jobs select yes, insert yes, update yes, delete yes"
    )
    assert the_line(lines, "sessions: ").startswith("sessions: ")
    assert the_line(lines, "databases by size: ")
    assert lines[-1] == "transactions open: none besides this report's"


async def test_a_session_holding_another_up_is_shown_with_the_one_it_blocks(
    driver: PostgresDriver, pg_url: str, sql: Sql
) -> None:
    holder = await asyncpg.connect(pg_url)
    waiter = await asyncpg.connect(pg_url)
    try:
        holder_pid, waiter_pid = holder.get_server_pid(), waiter.get_server_pid()
        tx = holder.transaction()
        await tx.start()
        await holder.execute("LOCK TABLE mcp_jobs.jobs IN ACCESS EXCLUSIVE MODE")
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter.fetchval, "SELECT count(*) FROM mcp_jobs.jobs")

            async def waiting() -> bool:
                pids = await sql.fetchval("SELECT pg_blocking_pids($1)", waiter_pid)
                return holder_pid in pids

            await eventually(waiting, within=30)
            lines = await report_lines(pg_url)
            await tx.rollback()
    finally:
        await holder.close()
        await waiter.close()
    start = lines.index(the_line(lines, "transactions open, oldest first: "))
    sessions = lines[start + 1 :]
    assert sessions[0].startswith(f"  pid {holder_pid} since ")
    assert ", idle in transaction, blocked by none: LOCK TABLE mcp_jobs.jobs" in sessions[0]
    assert sessions[1].startswith(f"  pid {waiter_pid} since ")
    assert f", active, blocked by {holder_pid}: SELECT count(*)" in sessions[1]


async def test_a_role_without_grants_is_shown_without_them(
    driver: PostgresDriver, pg_url: str, sql: Sql
) -> None:
    guest = f"report_guest_{uuid4().hex[:8]}"
    await sql.execute(f"CREATE ROLE {guest} LOGIN")
    try:
        host = pg_url.partition("@")[2]
        lines = await report_lines(f"postgresql://{guest}@{host}")
        assert the_line(lines, "privileges of ") == (
            f"privileges of {guest}: on schema mcp_jobs usage NO, create NO; "
            "on mcp_jobs.jobs select NO, insert NO, update NO, delete NO"
        )
        # What it may not read says so; the rest of the report is there.
        assert the_line(lines, "schema mcp_jobs: ").startswith(
            "schema mcp_jobs: cannot be read (InsufficientPrivilegeError"
        )
        assert lines[-1] == "transactions open: none besides this report's"
    finally:
        await sql.execute(f"DROP OWNED BY {guest}")
        await sql.execute(f"DROP ROLE {guest}")


async def test_a_schema_never_installed_says_to_migrate_and_that_runs_as_given() -> None:
    async with fresh_database(migrated=False) as url:
        lines = await report_lines(url)
        migrate = migrate_fix(url)
        assert (
            the_line(lines, "schema mcp_jobs: ")
            == f"schema mcp_jobs: not installed (run {migrate})"
        )
        assert not [line for line in lines if line.startswith("privileges of ")]
        await anyio.to_thread.run_sync(lambda: run_fix(migrate))
        lines = await report_lines(url)
        assert the_line(lines, "schema mcp_jobs: ").endswith(", this package's")


async def test_a_session_the_server_refuses_is_what_the_report_says(pg_url: str) -> None:
    host = pg_url.partition("@")[2].partition("/")[0]
    lines = await report_lines(f"postgresql://no_such_role_{uuid4().hex[:8]}@{host}/postgres")
    assert lines[0].startswith(f"server: {host} answered and refused the session (")
    assert "does not exist" in lines[0]


async def test_the_report_opens_no_pool_and_leaves_no_session(
    driver: PostgresDriver, pg_url: str, sql: Sql
) -> None:
    found = await driver.server_report()
    assert found.reachable
    assert driver.db.pool is None
    reports = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND application_name = 'mcp-jobs report'"
    )

    async def closed() -> bool:
        # A closed session's backend leaves pg_stat_activity once it has exited.
        return bool(await sql.fetchval(reports) == 0)

    await eventually(closed)


async def test_a_lock_held_on_what_it_reads_does_not_hang_the_report(
    driver: PostgresDriver, pg_url: str
) -> None:
    """A migration holding the version table: the report waits its lock_timeout (2 s) for the
    schema line, says why it has none, and shows the rest, the holder among the sessions."""
    holder = await asyncpg.connect(pg_url)
    try:
        async with holder.transaction():
            await holder.execute("LOCK TABLE mcp_jobs.schema_version IN ACCESS EXCLUSIVE MODE")
            with anyio.fail_after(60):
                lines = await report_lines(pg_url)
    finally:
        await holder.close()
    assert the_line(lines, "schema mcp_jobs: ") == (
        "schema mcp_jobs: cannot be read (LockNotAvailableError: "
        "canceling statement due to lock timeout)"
    )
    assert "statement_timeout 0" in the_line(lines, "settings: ")  # the database's, not ours
    assert [line for line in lines if line.startswith(f"  pid {holder.get_server_pid()} since ")]
