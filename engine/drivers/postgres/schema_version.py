"""Which version a PostgreSQL schema is at: read by migrate, the report, the driver and the
install refusals alike (a leaf, so none of them imports another for it)."""

from __future__ import annotations

from typing import TypeAlias

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from engine.drivers.postgres.sql import with_schema

# A pooled connection or one the application lends (the outbox); both speak the same API.
Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"

_INSTALLED = (
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables"
    " WHERE schemaname = $1 AND tablename = 'schema_version')"
)
_VERSION = "SELECT coalesce(max(version), 0) FROM {schema}.schema_version"
_EVERY_INSTALLED = (
    "SELECT schemaname FROM pg_catalog.pg_tables WHERE tablename = 'schema_version'"
    " ORDER BY schemaname"
)


async def current_version(conn: Conn, schema: str) -> int:
    """The highest applied migration, 0 when the schema was never installed."""
    # A catalog query, not to_regclass(): that reads the relation cache, which can still miss a
    # table another session committed while we waited for the migration lock.
    if not await conn.fetchval(_INSTALLED, schema):
        return 0
    version: int = await conn.fetchval(with_schema(_VERSION, schema))
    return version


async def installed_schemas(conn: Conn) -> list[str]:
    """The schemas of this database that hold a `schema_version` table: those installed."""
    return [row[0] for row in await conn.fetch(_EVERY_INSTALLED)]
