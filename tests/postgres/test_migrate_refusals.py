"""A migration the database refuses for good is said so, not retried: a schema holding another
program's tables (left as they are, with a fix naming a free schema), and a role without the
right to create or alter the schema (with a fix run as the schema's owner). A role with only
read/write grants works on a schema already at this build's version."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

import anyio
import asyncpg
import pytest

from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.sql import latest_version, migrations, with_schema
from engine.drivers.urls import SCHEMA_PARAM, migrate_fix, naming
from engine.errors import JobsError
from tests.postgres.builders import request
from tests.support.fix_lines import report_lines, run_fix, the_line
from tests.support.postgres import fresh_database


async def _sql(url: str, statement: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def _fetch(url: str, query: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetch(query)
    finally:
        await conn.close()


async def _refusal(url: str) -> JobsError:
    driver = PostgresDriver(url, pool_min=0, listen=False)
    try:
        with pytest.raises(JobsError) as raised:
            await driver.migrate()
    finally:
        await driver.close()
    return raised.value


@pytest.fixture
async def empty_url() -> AsyncIterator[str]:
    async with fresh_database(migrated=False) as url:
        yield url


@pytest.mark.parametrize(
    ("schema", "other", "in_the_way"),
    [
        (
            None,
            "CREATE SCHEMA mcp_jobs; CREATE TABLE mcp_jobs.jobs (id serial, title text)",
            "jobs",
        ),
        ("public", "CREATE TABLE public.jobs (id serial PRIMARY KEY, title text)", "jobs"),
        (
            "public",
            "CREATE TABLE public.schema_version (version varchar(50), description text)",
            "schema_version",
        ),
        (
            "public",
            "CREATE TABLE public.schema_version (version integer, name text, applied_at bigint);"
            "INSERT INTO public.schema_version VALUES (3, 'add_users', 0)",
            "schema_version",
        ),
    ],
)
async def test_a_schema_holding_another_programs_tables_is_refused_for_good(
    empty_url: str, schema: str | None, other: str, in_the_way: str
) -> None:
    await _sql(empty_url, other)
    url = empty_url if schema is None else naming(empty_url, SCHEMA_PARAM, schema)
    where = schema or "mcp_jobs"
    before = await _fetch(empty_url, f"SELECT * FROM {where}.{in_the_way}")
    error = await _refusal(url)
    assert error.code == "DATABASE_URL_INVALID" and not error.retryable
    assert f"{where}.{in_the_way}" in error.cause
    # The fix migrates into a schema nothing uses, and runs as given.
    free = "mcp_jobs_2" if schema is None else "mcp_jobs"
    assert error.fix == migrate_fix(naming(url, SCHEMA_PARAM, free))
    # The report says the same, not "run db migrate" on the schema that refuses it.
    assert the_line(await report_lines(url), f"schema {where}: ") == (
        f"schema {where}: holds {where}.{in_the_way}, another program's, which mcp-jobs leaves "
        f"alone (install it in a schema of its own: {error.fix})"
    )
    await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
    # Nothing of the other program's was touched.
    assert await _fetch(empty_url, f"SELECT * FROM {where}.{in_the_way}") == before
    tables = await _fetch(
        empty_url, f"SELECT tablename FROM pg_tables WHERE schemaname = '{where}'"
    )
    assert {row["tablename"] for row in tables} == {in_the_way}


def _as(url: str, role: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}"))


async def _grant_read_write(pg_url: str) -> str:
    """A role with read/write grants on the schema and nothing more: the usual production
    role, whose schema the owner migrates."""
    role = f"app_{uuid4().hex[:8]}"
    await _sql(
        pg_url,
        f"CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA mcp_jobs TO {role};"
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA mcp_jobs TO {role};"
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA mcp_jobs TO {role};"
        f"REVOKE CREATE ON DATABASE {urlsplit(pg_url).path[1:]} FROM PUBLIC;",
    )
    return role


@pytest.fixture
async def app_role(pg_url: str) -> AsyncIterator[str]:
    role = await _grant_read_write(pg_url)
    try:
        yield role
    finally:
        await _sql(pg_url, f"DROP OWNED BY {role}; DROP ROLE {role}")


async def test_a_role_with_read_write_grants_works_on_a_schema_at_this_version(
    pg_url: str, app_role: str
) -> None:
    driver = PostgresDriver(_as(pg_url, app_role), pool_min=0, listen=False)
    try:
        await driver.migrate()
        (result,) = await driver.enqueue([request(0)])
        assert (await driver.get(result.id)).id == result.id
    finally:
        await driver.close()


async def test_a_role_that_may_not_upgrade_a_schema_behind_is_told_to_migrate_as_its_owner(
    empty_url: str,
) -> None:
    pg_url, latest = empty_url, latest_version()
    # The schema as the build before the last migration left it.
    for migration in migrations()[:-1]:
        await _sql(pg_url, with_schema(migration.text, "mcp_jobs"))
        await _sql(
            pg_url,
            "INSERT INTO mcp_jobs.schema_version VALUES "
            f"({migration.version}, '{migration.name}', 0)",
        )
    app_role = await _grant_read_write(pg_url)
    try:
        owner = (await _fetch(pg_url, "SELECT current_user AS u"))[0]["u"]
        error = await _refusal(_as(pg_url, app_role))
        assert error.code == "SCHEMA_PRIVILEGE_MISSING" and not error.retryable
        assert app_role in error.cause and f"version {latest - 1}" in error.cause
        assert error.fix == migrate_fix(_as(pg_url, owner))
        await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
        driver = PostgresDriver(_as(pg_url, app_role), pool_min=0, listen=False)
        try:
            await driver.migrate()  # nothing left to do: it works
        finally:
            await driver.close()
    finally:
        await _sql(pg_url, f"DROP OWNED BY {app_role}; DROP ROLE {app_role}")


async def test_a_role_that_may_not_create_the_schema_is_told_who_may(empty_url: str) -> None:
    role = f"app_{uuid4().hex[:8]}"
    database = urlsplit(empty_url).path[1:]
    await _sql(
        empty_url, f"CREATE ROLE {role} LOGIN; REVOKE CREATE ON DATABASE {database} FROM PUBLIC"
    )
    try:
        owner = (
            await _fetch(
                empty_url,
                "SELECT pg_get_userbyid(datdba) AS u FROM pg_database "
                "WHERE datname = current_database()",
            )
        )[0]["u"]
        error = await _refusal(_as(empty_url, role))
        assert error.code == "SCHEMA_PRIVILEGE_MISSING" and not error.retryable
        assert role in error.cause and "not installed" in error.cause
        assert error.fix == migrate_fix(_as(empty_url, owner))
        await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
    finally:
        await _sql(empty_url, f"DROP OWNED BY {role}; DROP ROLE {role}")


async def test_db_migrate_says_what_it_applied_and_a_schema_ahead_of_this_build(
    empty_url: str,
) -> None:
    latest = latest_version()
    migrate = migrate_fix(empty_url)
    out = await anyio.to_thread.run_sync(lambda: run_fix(migrate))
    assert out.splitlines() == [
        f"postgres database {empty_url}: applied 1 to {latest}",
        f"schema mcp_jobs: version {latest}, this package's",
    ]
    await _sql(empty_url, f"INSERT INTO mcp_jobs.schema_version VALUES ({latest + 1}, 'newer', 0)")
    out = await anyio.to_thread.run_sync(lambda: run_fix(migrate))
    assert out.splitlines() == [
        f"postgres database {empty_url}: nothing to apply",
        f"schema mcp_jobs: version {latest + 1}, ahead of this package's {latest} "
        "(a newer mcp-jobs migrated it: upgrade this one)",
    ]
