"""Backends behind one Protocol, chosen from a URL by one factory."""

from __future__ import annotations

import os
from typing import Any

from engine.clock import SYSTEM_CLOCK, Clock
from engine.drivers.base import Driver
from engine.drivers.urls import check_postgres_url, sqlite_path
from engine.errors import DatabaseUrlInvalidError

DATABASE_URL_ENV = "MCP_JOBS_DATABASE_URL"
DEFAULT_DATABASE_URL = "sqlite:///.mcp-jobs/jobs.db"


def resolve_url(url: str | None = None) -> str:
    """The explicit URL, else `MCP_JOBS_DATABASE_URL`, else the embedded SQLite default."""
    return url or os.environ.get(DATABASE_URL_ENV) or DEFAULT_DATABASE_URL


def open_driver(url: str | None = None, *, clock: Clock | None = None, **options: Any) -> Driver:
    """The driver for `url` (see `resolve_url`). A URL no driver could use raises
    DATABASE_URL_INVALID here, before any file is opened or connection tried."""
    resolved = resolve_url(url)
    clock = clock or SYSTEM_CLOCK
    scheme = resolved.split("://", 1)[0].lower() if "://" in resolved else ""
    if scheme == "memory":
        from engine.drivers.memory import MemoryDriver

        return MemoryDriver(clock)
    if scheme == "sqlite":
        from engine.drivers.sqlite import SqliteDriver

        return SqliteDriver(sqlite_path(resolved), clock=clock, **options)
    if scheme in ("postgresql", "postgres"):
        check_postgres_url(resolved)  # before asyncpg is imported or any connection is tried
        from engine.drivers.postgres import PostgresDriver

        return PostgresDriver(resolved, clock=clock, **options)
    raise DatabaseUrlInvalidError(resolved)


__all__ = [
    "DATABASE_URL_ENV",
    "DEFAULT_DATABASE_URL",
    "Driver",
    "open_driver",
    "resolve_url",
    "sqlite_path",
]
