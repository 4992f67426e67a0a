"""A command that reads or acts on stored jobs installs no PostgreSQL schema, as it creates no
SQLite file (cli/database_file.py): `jobs ls` with `?schema=mcp_job` for `mcp_jobs` installed a
whole empty schema and said "no jobs". Refused, with the command on the installed schema it
plainly stands for, else the `db migrate` that installs this one."""

from __future__ import annotations

import difflib

import asyncpg

from engine.drivers.postgres import DEFAULT_SCHEMA
from engine.drivers.postgres.schema_version import installed_schemas
from engine.drivers.urls import SCHEMA_PARAM, naming, split_schema
from engine.errors import DatabaseUrlInvalidError

# How alike an installed schema's name must be to the one asked for to be the one meant.
_ALIKE = 0.75
# The installed schemas a refusal names, at most.
_SHOWN = 10
# A check, not the command's own connection: one that does not answer soon is left to connect().
_CONNECT_SECONDS = 10


class NoSchemaError(DatabaseUrlInvalidError):
    """DATABASE_URL_INVALID for a PostgreSQL URL whose schema is not installed, from a command
    that only acts on what is stored. `near_url`: the URL of the installed schema it plainly
    meant (cli/mend.py writes the command on it), else None: the fix installs this one."""

    def __init__(self, url: str, schema: str, installed: list[str], near: str | None) -> None:
        self.near_url = None if near is None else naming(url, SCHEMA_PARAM, near)
        shown = ", ".join(installed[:_SHOWN]) + (", …" if len(installed) > _SHOWN else "")
        there = f"installed here: {shown}" if installed else "none is installed here"
        meant = f" (meant {near}?)" if near is not None else ""
        super().__init__(
            url,
            reason=f"no mcp-jobs schema {schema} in this database ({there}){meant}, and a "
            "command that reads or acts on stored jobs installs none (db migrate, a worker or "
            "serve does)",
            fix="mcp-jobs db migrate",  # written with the URL (FixContext)
            answered=True,  # the URL is well formed: the schema may yet be installed
        )


async def require_schema(url: str) -> None:
    """Raise `NoSchemaError` when `url` is a PostgreSQL URL whose schema is not installed; any
    other URL, or a server that does not answer this check (connect() says why), passes."""
    if not url.lower().startswith(("postgres://", "postgresql://")):
        return
    dsn, named = split_schema(url)
    schema = named or DEFAULT_SCHEMA
    try:
        conn = await asyncpg.connect(dsn, timeout=_CONNECT_SECONDS)
    except Exception:  # refused, away, a bad password: the command's own connect() says so
        return
    try:
        installed = await installed_schemas(conn)
    except asyncpg.PostgresError:
        return
    finally:
        await conn.close()
    if schema in installed:
        return
    near = difflib.get_close_matches(schema, installed, n=1, cutoff=_ALIKE)
    raise NoSchemaError(url, schema, installed, near[0] if near else None)
