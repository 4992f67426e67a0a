"""A role whose only lack is its grants on an installed schema is told to be granted them, by a
fix that runs as given: `db migrate` as the owner (the old fix) applies nothing and changes
nothing, so the same refusal came back for ever."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

import anyio
import asyncpg
import pytest

from engine.drivers.postgres import PostgresDriver
from engine.drivers.urls import SCHEMA_PARAM, naming
from engine.errors import JobsError
from tests.postgres.builders import request
from tests.support.fix_lines import run_fix
from tests.support.postgres import fresh_database


async def _sql(url: str, statement: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def _as(url: str, role: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rpartition('@')[2]}"))


@pytest.fixture
async def owner_url() -> AsyncIterator[str]:
    async with fresh_database(migrated=False) as url:
        yield url


async def _migrate(url: str) -> None:
    driver = PostgresDriver(url, pool_min=0, listen=False)
    try:
        await driver.migrate()
    finally:
        await driver.close()


async def _refusal(url: str) -> JobsError:
    with pytest.raises(JobsError) as raised:
        await _migrate(url)
    return raised.value


@pytest.mark.parametrize("schema", [None, "app1"])
async def test_a_role_without_grants_on_an_installed_schema_is_granted_them_by_the_fix(
    owner_url: str, schema: str | None
) -> None:
    url = owner_url if schema is None else naming(owner_url, SCHEMA_PARAM, schema)
    await _migrate(url)  # the owner installed it, as `db migrate` run as the owner does
    role = f"app_{uuid4().hex[:8]}"
    database = urlsplit(owner_url).path[1:]
    await _sql(
        owner_url, f"CREATE ROLE {role} LOGIN; REVOKE CREATE ON DATABASE {database} FROM PUBLIC"
    )
    try:
        error = await _refusal(_as(url, role))
        assert error.code == "SCHEMA_PRIVILEGE_MISSING" and not error.retryable
        await anyio.to_thread.run_sync(lambda: run_fix(error.fix))
        # One hop: the role now works, and the refusal is not answered again.
        driver = PostgresDriver(_as(url, role), pool_min=0, listen=False)
        try:
            await driver.migrate()
            (result,) = await driver.enqueue([request(0)])
            assert (await driver.get(result.id)).id == result.id
        finally:
            await driver.close()
    finally:
        await _sql(owner_url, f"DROP OWNED BY {role}; DROP ROLE {role}")
