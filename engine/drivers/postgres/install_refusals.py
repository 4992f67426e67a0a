"""Why a migration is refused for good, said as such rather than retried as an outage: the
schema holds another program's tables (left as they are; the fix names a free schema), or the
role may not create or alter the schema (the fix migrates as its owner), or may not even read
one that is installed (the fix migrates as its owner and grants the role read/write).

A schema is mcp-jobs' when its `schema_version` is ours (our columns, our migrations' names);
with none, when it holds nothing of the names schema.sql creates.
"""

from __future__ import annotations

import json
import re
from functools import cache
from urllib.parse import quote, urlsplit, urlunsplit

import asyncpg.exceptions as pgx

from engine.driver_errors import DatabaseUrlInvalidError, SchemaPrivilegeMissingError
from engine.drivers.postgres.faults import DRIVER_FAILURES, is_retried
from engine.drivers.postgres.schema_version import Conn, current_version
from engine.drivers.postgres.sql import latest_version, migrations, raw_schema, with_schema
from engine.drivers.urls import SCHEMA_PARAM, migrate_fix, naming, split_schema
from engine.errors import JobsError
from engine.extras import this_python
from engine.shell_words import shell_word

_RELATIONS = (
    "SELECT c.relname FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1"
)
_VERSION_COLUMNS = (
    "SELECT a.attname, a.atttypid::regtype::text FROM pg_catalog.pg_attribute a"
    " JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = $1 AND c.relname = 'schema_version' AND a.attnum > 0"
    " AND NOT a.attisdropped"
)
_STAMPED = "SELECT version, name FROM {schema}.schema_version WHERE version <= $1"
_OWNERS = (
    "SELECT current_user AS role,"
    " (SELECT pg_get_userbyid(nspowner) FROM pg_catalog.pg_namespace WHERE nspname = $1)"
    " AS schema_owner,"
    " (SELECT pg_get_userbyid(datdba) FROM pg_catalog.pg_database"
    "  WHERE datname = current_database()) AS database_owner"
)
_SCHEMAS = "SELECT nspname FROM pg_catalog.pg_namespace"
_CREATES = re.compile(
    r"^CREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX|SEQUENCE|VIEW)\s+(?:IF NOT EXISTS\s+)?"
    r"(?:\{schema\}\.)?(\w+)",
    re.MULTILINE,
)
_DEFAULT = "mcp_jobs"
_BARE = re.compile(r"[a-z_][a-z0-9_]*")


class SchemaTaken(Exception):
    """Raised by the migration, before it writes, when the schema is another program's."""

    def __init__(self, tables: list[str]) -> None:
        super().__init__(", ".join(tables))
        self.tables = tables


@cache
def declared_relations() -> frozenset[str]:
    """The tables and indexes schema.sql creates: an install would meet any already there."""
    return frozenset(_CREATES.findall(raw_schema()))


async def in_the_way(conn: Conn, schema: str) -> list[str]:
    """The relations of `schema` that make it another program's, or [] when it is ours (or
    holds nothing an install would meet)."""
    relations = {row[0] for row in await conn.fetch(_RELATIONS, schema)}
    if "schema_version" not in relations:
        return sorted(relations & declared_relations())
    columns = {str(row[0]): str(row[1]) for row in await conn.fetch(_VERSION_COLUMNS, schema)}
    if columns.get("version") != "integer" or columns.get("name") != "text":
        return ["schema_version"]
    shipped = {m.version: m.name for m in migrations()}
    stamped = await conn.fetch(with_schema(_STAMPED, schema), latest_version())
    return [] if all(shipped.get(v) == n for v, n in stamped) else ["schema_version"]


async def refusal(conn: Conn, url: str, schema: str, exc: BaseException) -> JobsError | None:
    """The terminal error for a migration that failed with `exc`, or None when it is not one
    of these (an outage, a conflict, anything else keeps its own conversion)."""
    if isinstance(exc, SchemaTaken):
        tables = exc.tables
    elif is_retried(exc):
        return None
    else:
        try:
            if isinstance(exc, pgx.InsufficientPrivilegeError):
                return await _privilege_missing(conn, url, schema, exc)
            tables = await in_the_way(conn, schema)
        except DRIVER_FAILURES:
            return None  # the catalog cannot be read either: the failure speaks for itself
    if not tables:
        return None
    named = ", ".join(f"{schema}.{table}" for table in tables)
    reason = (
        f"schema {schema} holds {named}, which mcp-jobs did not create (another program's "
        "tables; nothing of them was changed). Install mcp-jobs in a schema of its own: the "
        f"URL's ?{SCHEMA_PARAM}= names it, in every process that uses these jobs"
    )
    # Answered: the URL reached a schema that refused it, and freeing the schema would mend it
    # as well (the CLI keeps this fix rather than writing one for a URL that names nothing).
    fix = await elsewhere_fix(conn, url)
    return DatabaseUrlInvalidError(url, reason=reason, fix=fix, answered=True)


async def elsewhere_fix(conn: Conn, url: str) -> str:
    """`db migrate` into the first schema of the database that does not exist yet."""
    taken = {row[0] for row in await conn.fetch(_SCHEMAS)}
    free = next(
        name
        for name in (_DEFAULT, *(f"{_DEFAULT}_{n}" for n in range(2, len(taken) + 3)))
        if name not in taken
    )
    return migrate_fix(naming(url, SCHEMA_PARAM, free))


async def _privilege_missing(
    conn: Conn, url: str, schema: str, exc: pgx.InsufficientPrivilegeError
) -> SchemaPrivilegeMissingError:
    owners = await conn.fetchrow(_OWNERS, schema)
    assert owners is not None
    try:
        version: int | None = await current_version(conn, schema)
    except DRIVER_FAILURES:
        version = None  # not even readable as this role
    latest = latest_version()
    if version == 0:
        state = "not installed"
    elif version is None:
        state = "unreadable to this role"
    else:
        state = f"at version {version}, and this build needs {latest}"
    owner = owners["schema_owner"] or owners["database_owner"]
    whose = "its owner" if owners["schema_owner"] else "the database's owner"
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    role = owners["role"]
    fix = migrate_fix(_as_role(url, owner))
    then = f"{role} then works with its read/write grants"
    if version is None and owners["schema_owner"]:
        # Installed, but not readable as this role: migrating alone applies nothing (or not
        # the grants), and the same refusal came back. The owner grants them too.
        then = f"grant {role} read/write on it; the fix does both"
        fix = f"{fix} && {grant_line(_as_role(url, owner), schema, role)}"
    cause = (
        f"role {role} may not create or alter schema {schema} (SQLSTATE 42501: "
        f"{detail}), and the schema is {state}. Migrate it as a role that may ({whose}, "
        f"{owner}); {then}"
    )
    return SchemaPrivilegeMissingError("postgres", cause, fix)


def _ident(name: str) -> str:
    """A role's name as SQL names it: bare when PostgreSQL would read it back as it is."""
    return name if _BARE.fullmatch(name) else '"' + name.replace('"', '""') + '"'


def grant_sql(schema: str, role: str) -> str:
    """The read/write grants a role needs on `schema` (which the schema name rule keeps to
    [a-z0-9_]), now and on what later migrations create as its owner."""
    to = _ident(role)
    tables, sequences = "SELECT, INSERT, UPDATE, DELETE", "USAGE, SELECT"
    return (
        f"GRANT USAGE ON SCHEMA {schema} TO {to}; "
        f"GRANT {tables} ON ALL TABLES IN SCHEMA {schema} TO {to}; "
        f"GRANT {sequences} ON ALL SEQUENCES IN SCHEMA {schema} TO {to}; "
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT {tables} ON TABLES TO {to}; "
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT {sequences} ON SEQUENCES TO {to}"
    )


def grant_line(owner_url: str, schema: str, role: str) -> str:
    """A line that grants `role` read/write on `schema` as `owner_url`'s role, on the Python
    this package runs on (asyncpg is there; no psql needed), without the URL's `?schema=`,
    which asyncpg would send to the server as a setting."""
    dsn = split_schema(owner_url)[0]
    code = (
        "import asyncio, asyncpg; loop = asyncio.new_event_loop(); "
        f"conn = loop.run_until_complete(asyncpg.connect({json.dumps(dsn)})); "
        f"loop.run_until_complete(conn.execute({json.dumps(grant_sql(schema, role))})); "
        "loop.run_until_complete(conn.close()); "
        f"print({json.dumps(f'granted {role} read/write on schema {schema}')})"
    )
    return f"{this_python()} -c {shell_word(code)}"


def _as_role(url: str, role: str) -> str:
    """`url` connecting as `role`, without the other role's password (PGPASSWORD or ~/.pgpass
    gives the owner's)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{quote(role, safe='')}@{host}"))
