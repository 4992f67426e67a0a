"""Fresh PostgreSQL databases for tests: a template migrated once, copied for every test.

`CREATE DATABASE … TEMPLATE` copies a migrated schema in tens of milliseconds, so each test
starts from its own empty, migrated database and cannot see another's rows. The template's name
carries a digest of the schema files, so a changed schema builds a new template instead of
reusing a stale one. The server comes from MCP_JOBS_TEST_PG_DSN (.ci/run starts one).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.sql import migrations, raw_schema

PG_DSN_ENV = "MCP_JOBS_TEST_PG_DSN"

_template: str | None = None


def base_dsn() -> str:
    dsn = os.environ.get(PG_DSN_ENV)
    if not dsn:
        raise RuntimeError(f"{PG_DSN_ENV} is not set (.ci/run sets it)")
    return dsn


def with_database(dsn: str, database: str) -> str:
    """`dsn` pointing at another database on the same server."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{database}"))


def _schema_digest() -> str:
    text = raw_schema() + "".join(m.text for m in migrations())
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _ident(name: str) -> str:
    # Database names cannot be parameters. Every name here is ours: a prefix and hex digits.
    if not name.replace("_", "").isalnum():
        raise ValueError(f"not a test database name: {name!r}")
    return f'"{name}"'


async def _ensure_template(base: str) -> str:
    global _template
    if _template is not None:
        return _template
    name = f"mcp_jobs_tpl_{_schema_digest()}"
    conn = await asyncpg.connect(base)
    try:
        # Two test sessions on one server build the template once between them.
        await conn.execute("SELECT pg_advisory_lock(hashtext('mcp-jobs test template'))")
        try:
            if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
                building = f"{name}_build_{os.getpid()}"
                await conn.execute(f"DROP DATABASE IF EXISTS {_ident(building)} WITH (FORCE)")
                await conn.execute(f"CREATE DATABASE {_ident(building)} TEMPLATE template0")
                driver = PostgresDriver(with_database(base, building), pool_min=0, listen=False)
                try:
                    await driver.migrate()
                finally:
                    await driver.close()
                # Renamed only once complete: a crash mid-build leaves no half template behind.
                await conn.execute(f"ALTER DATABASE {_ident(building)} RENAME TO {_ident(name)}")
        finally:
            await conn.execute("SELECT pg_advisory_unlock(hashtext('mcp-jobs test template'))")
    finally:
        await conn.close()
    _template = name
    return name


@asynccontextmanager
async def fresh_database(*, migrated: bool = True) -> AsyncIterator[str]:
    """A new database (migrated, or empty when `migrated=False`), dropped afterwards."""
    base = base_dsn()
    source = await _ensure_template(base) if migrated else "template0"
    name = f"mcp_jobs_test_{secrets.token_hex(6)}"
    conn = await asyncpg.connect(base)
    try:
        # FILE_COPY (PostgreSQL 15+) copies the small template's files instead of WAL-logging
        # every block: about three times faster per test.
        strategy = " STRATEGY FILE_COPY" if conn.get_server_version().major >= 15 else ""
        await conn.execute(f"CREATE DATABASE {_ident(name)} TEMPLATE {_ident(source)}{strategy}")
    finally:
        await conn.close()
    try:
        yield with_database(base, name)
    finally:
        conn = await asyncpg.connect(base)
        try:
            # FORCE: a test that failed may have left a pool open on it.
            await conn.execute(f"DROP DATABASE IF EXISTS {_ident(name)} WITH (FORCE)")
        finally:
            await conn.close()
