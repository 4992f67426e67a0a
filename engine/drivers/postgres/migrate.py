"""The one install point of the PostgreSQL schema (rule 10): versioned, idempotent, concurrent-safe.

A database with no `schema_version` table is installed from schema.sql (the declared current
schema) and stamped with every migration version; a database at version v gets migrations
v+1..n. Both run in one transaction under an advisory lock, so two processes migrating at once
queue: the second finds the work done and changes nothing. A test installs both ways and
compares the catalogs, which is what keeps schema.sql and the migrations honest.
"""

from __future__ import annotations

from typing import Literal

from engine.drivers.postgres.install_refusals import SchemaTaken, in_the_way
from engine.drivers.postgres.schema_version import Conn, current_version
from engine.drivers.postgres.sql import (
    latest_version,
    migrations,
    raw_schema,
    with_schema,
)

InstallFrom = Literal["schema", "migrations"]
_STAMP = (
    "INSERT INTO {schema}.schema_version (version, name, applied_at) "
    "SELECT v, n, $3 FROM unnest($1::integer[], $2::text[]) AS m(v, n) "
    "ON CONFLICT (version) DO NOTHING"
)


async def migrate(
    conn: Conn,
    schema: str,
    now_ms: int,
    *,
    install_from: InstallFrom = "schema",
) -> list[int]:
    """Bring `schema` to the latest version; returns the versions this call applied."""
    latest = latest_version()
    if await current_version(conn, schema) >= latest:
        return []  # the common case: no lock, two cheap reads
    async with conn.transaction():
        # Per schema, so two installs in one database do not wait on each other.
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext('mcp-jobs migrate'), hashtext($1))", schema
        )
        version = await current_version(conn, schema)
        pending = [m for m in migrations() if m.version > version]
        if not pending:
            return []
        # Before anything is written: another program's tables are never altered or stamped.
        tables = await in_the_way(conn, schema)
        if tables:
            raise SchemaTaken(tables)
        if version == 0 and install_from == "schema":
            await conn.execute(with_schema(raw_schema(), schema))
        else:
            for migration in pending:
                await conn.execute(with_schema(migration.text, schema))
        await conn.execute(
            with_schema(_STAMP, schema),
            [m.version for m in pending],
            [m.name for m in pending],
            now_ms,
        )
    return [m.version for m in pending]
