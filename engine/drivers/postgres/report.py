"""`mcp-jobs db report` on PostgreSQL: the fix of an unreachable server, a full disk, a
transaction rolled back by another, a refusal (a timeout, a privilege, a standby). It reads what
psql would have been asked for, through asyncpg, so it runs wherever this package is installed
(slim images and the Debian server packages leave psql off the PATH).
"""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import asyncpg.exceptions as pgx

from engine.clock import offset_line
from engine.drivers.base import StoreReport
from engine.drivers.postgres import server_time
from engine.drivers.postgres.faults import DRIVER_FAILURES, setting_refused
from engine.drivers.postgres.install_refusals import elsewhere_fix, in_the_way
from engine.drivers.postgres.schema_version import current_version
from engine.drivers.postgres.sql import latest_version
from engine.drivers.schema_versions import version_words
from engine.drivers.urls import migrate_fix, split_schema

# The sessions and databases listed; the rest are counted.
SHOWN = 10
QUERY_SHOWN = 80
_SETTINGS = (
    "default_transaction_read_only",
    "statement_timeout",
    "lock_timeout",
    "idle_in_transaction_session_timeout",
)
_SERVER = """
SELECT current_setting('server_version') AS version, current_database() AS database,
       pg_size_pretty(pg_database_size(current_database())) AS size,
       current_user AS role, host(inet_server_addr()) AS addr, inet_server_port() AS port,
       pg_is_in_recovery() AS standby,
       current_setting('max_connections')::int AS max_connections,
       (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') AS sessions,
       (SELECT count(*) FROM pg_stat_activity
        WHERE application_name LIKE 'mcp-jobs%' AND pid <> pg_backend_pid()) AS ours
"""
_PRIVILEGES = """
SELECT has_schema_privilege($1, 'USAGE') AS usage, has_schema_privilege($1, 'CREATE') AS create,
       t.oid IS NOT NULL AS has_jobs,
       t.oid IS NOT NULL AND has_table_privilege(t.oid, 'SELECT') AS select,
       t.oid IS NOT NULL AND has_table_privilege(t.oid, 'INSERT') AS insert,
       t.oid IS NOT NULL AND has_table_privilege(t.oid, 'UPDATE') AS update,
       t.oid IS NOT NULL AND has_table_privilege(t.oid, 'DELETE') AS delete
FROM (SELECT 1) AS one
LEFT JOIN pg_class t ON t.relname = 'jobs' AND t.relkind IN ('r', 'p')
     AND t.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
"""
_BOUNDED = "SET lock_timeout = '2s'; SET statement_timeout = '20s'"
_SCHEMA_EXISTS = "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)"
_SIZES = """
SELECT datname, pg_size_pretty(pg_database_size(datname)) AS size, count(*) OVER () AS total
FROM pg_database WHERE datallowconn ORDER BY pg_database_size(datname) DESC LIMIT $1
"""
# Who waits on whom, oldest transaction first: what keeps rolling the engine's writes back.
# Sessions only (an autovacuum worker a session waits on shows in its "blocked by").
_OPEN = """
SELECT pid, pg_blocking_pids(pid) AS blocked_by, state, xact_start,
       left(regexp_replace(query, '\\s+', ' ', 'g'), $2) AS query, count(*) OVER () AS total,
       now() - xact_start AS age
FROM pg_stat_activity
WHERE datname = current_database() AND xact_start IS NOT NULL AND pid <> pg_backend_pid()
  AND backend_type = 'client backend'
ORDER BY xact_start LIMIT $1
"""


async def report(url: str, schema: str, timeout_s: float) -> StoreReport:
    """What `ServerReport.server_report` answers for the PostgreSQL driver."""
    try:
        # No statement cache: the report may go through a transaction pooler (PgBouncer).
        conn = await asyncpg.connect(
            split_schema(url)[0],
            timeout=timeout_s,
            statement_cache_size=0,
            server_settings={"application_name": "mcp-jobs report"},
        )
    except DRIVER_FAILURES as exc:
        return StoreReport(False, _unreachable(url, exc))
    try:
        return StoreReport(True, await _lines(conn, url, schema))
    finally:
        await conn.close(timeout=timeout_s)


# What to change for each way the server refuses the session the URL names.
_SESSION_REFUSALS: dict[type[BaseException], str] = {
    pgx.InvalidCatalogNameError: (
        "the database the URL's path names does not exist on this server: correct the path, "
        "or create the database (CREATE DATABASE, as a role that may)"
    ),
    pgx.InvalidPasswordError: (
        "the server refused the password: give the right one in the URL, PGPASSWORD or ~/.pgpass"
    ),
    pgx.InvalidAuthorizationSpecificationError: (
        "the URL's user is not a role on this server, or no pg_hba.conf rule lets it reach this "
        "database from here: correct the user, or add the role or the rule"
    ),
}


def _unreachable(url: str, exc: BaseException) -> list[str]:
    parts = urlsplit(url)
    where = f"{parts.hostname or 'the local socket'}" + (f":{parts.port}" if parts.port else "")
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    failure = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    if setting_refused(exc):
        return [
            f"server: {where} answered and refused the session ({failure})",
            "an option in the URL's query string is not a setting the server knows or takes "
            "(asyncpg sends each option it does not know as one): correct or remove it",
        ]
    refused = _SESSION_REFUSALS.get(type(exc))
    if refused is not None:
        return [f"server: {where} answered and refused the session ({failure})", refused]
    if isinstance(exc, asyncpg.PostgresError):
        return [
            f"server: {where} answered and refused the session ({failure})",
            "the user, password (PGPASSWORD or ~/.pgpass), database or pg_hba.conf rule of the "
            "URL is at fault, or the server is starting or full of sessions",
        ]
    return [
        f"server: no answer from {where} ({failure})",
        f"start PostgreSQL at {where}, or point the URL at where it runs",
    ]


async def _lines(conn: asyncpg.Connection[Any], url: str, schema: str) -> list[str]:
    # The defaults the driver's sessions get, read before the report bounds its own session: a
    # tiny statement_timeout (the very refusal this report is the fix of) must not cancel it.
    settings = {name: await _setting(conn, name) for name in _SETTINGS}
    # A lock held on a table it reads (a migration running) does not hang the report.
    await conn.execute(_BOUNDED)
    for name in [name for name, value in settings.items() if value is None]:
        settings[name] = await conn.fetchval(_RESET_VALUE, name)
    server = await conn.fetchrow(_SERVER)
    assert server is not None
    at = f"{server['addr']}:{server['port']}" if server["addr"] else "a local socket"
    lines = [
        f"server: PostgreSQL {server['version']} at {at}, database {server['database']} "
        f"({server['size']}), user {server['role']}",
        "recovery: a standby, read-only (point the URL at the primary)"
        if server["standby"]
        else "recovery: none (a primary: writes go through)",
        "settings: " + ", ".join(f"{name} {value}" for name, value in settings.items()),
        await offset_line(lambda: server_time.read_ms(conn)),
    ]
    # A role without grants still gets the rest of the report: what it may not read says so.
    lines += await _read(f"schema {schema}", _schema_line(conn, url, schema))
    if await conn.fetchval(_SCHEMA_EXISTS, schema):
        lines += await _read("privileges", _privileges_line(conn, schema, str(server["role"])))
    lines.append(
        f"sessions: {server['sessions']} of max_connections {server['max_connections']} "
        f"(mcp-jobs: {server['ours']} besides this one)"
    )
    lines += await _read("databases by size", _sizes_line(conn))
    lines += await _read("transactions open", _open_lines(conn))
    return lines


# A setting as the session would RESET it (`SHOW`'s own units): read once the report's session
# is bounded, for a setting whose SHOW the session's default timeout cancelled.
_RESET_VALUE = """
SELECT CASE WHEN unit IS NULL OR reset_val = '0' THEN reset_val ELSE reset_val || unit END
FROM pg_settings WHERE name = $1
"""


async def _setting(conn: asyncpg.Connection[Any], name: str) -> str | None:
    """`SHOW name`, or None when the session's own statement_timeout cancelled it."""
    try:
        return str(await conn.fetchval(f"SHOW {name}"))
    except pgx.QueryCanceledError:
        return None


async def _read(label: str, lines: Awaitable[str | list[str]]) -> list[str]:
    try:
        found = await lines
    except asyncpg.PostgresError as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return [f"{label}: cannot be read ({type(exc).__name__}: {detail})"]
    return [found] if isinstance(found, str) else found


async def _sizes_line(conn: asyncpg.Connection[Any]) -> str:
    sizes = await conn.fetch(_SIZES, SHOWN)
    shown = ", ".join(f"{r['datname']} {r['size']}" for r in sizes)
    more = int(sizes[0]["total"]) - len(sizes) if sizes else 0
    return f"databases by size: {shown}" + (f" and {more} more" if more > 0 else "")


async def _schema_line(conn: asyncpg.Connection[Any], url: str, schema: str) -> str:
    tables = await in_the_way(conn, schema)
    if tables:
        named = ", ".join(f"{schema}.{table}" for table in tables)
        return (
            f"schema {schema}: holds {named}, another program's, which mcp-jobs leaves alone "
            f"(install it in a schema of its own: {await elsewhere_fix(conn, url)})"
        )
    version = await current_version(conn, schema)
    return f"schema {schema}: {version_words(version, latest_version(), migrate_fix(url))}"


async def _privileges_line(conn: asyncpg.Connection[Any], schema: str, role: str) -> str:
    row = await conn.fetchrow(_PRIVILEGES, schema)
    assert row is not None

    def said(name: str) -> str:
        return f"{name} {'yes' if row[name] else 'NO'}"

    line = f"privileges of {role}: on schema {schema} {said('usage')}, {said('create')}"
    if row["has_jobs"]:
        table = ", ".join(said(name) for name in ("select", "insert", "update", "delete"))
        line += f"; on {schema}.jobs {table}"
    return line


async def _open_lines(conn: asyncpg.Connection[Any]) -> list[str]:
    rows = await conn.fetch(_OPEN, SHOWN, QUERY_SHOWN)
    if not rows:
        return ["transactions open: none besides this report's"]
    total = int(rows[0]["total"])
    lines = [
        f"transactions open, oldest first: {total}" + (f" ({SHOWN} shown)" if total > SHOWN else "")
    ]
    for row in rows:
        since = row["xact_start"].astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        age = int(row["age"].total_seconds())
        blocked = ", ".join(str(pid) for pid in row["blocked_by"]) or "none"
        lines.append(
            f"  pid {row['pid']} since {since} ({age} s), {row['state']}, blocked by {blocked}: "
            f"{row['query']}"
        )
    return lines


__all__ = ["report"]
