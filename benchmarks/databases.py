"""A fresh database per system and workload, on the one server every system shares."""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from benchmarks.systems.base import Backend

# Server settings worth printing beside the numbers.
SETTINGS = (
    "server_version",
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "shared_buffers",
    "max_connections",
    "wal_level",
)


def add_database_arguments(parser: argparse.ArgumentParser) -> None:
    """`--dsn` and `--backend`, as every stand-alone benchmark takes them."""
    parser.add_argument(
        "--dsn",
        default=os.environ.get("MCP_JOBS_BENCH_DSN") or os.environ.get("MCP_JOBS_TEST_PG_DSN"),
        help="an admin DSN on the server (a fresh database is made on it and dropped)",
    )
    parser.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")


def dsn_missing(args: argparse.Namespace) -> bool:
    """Whether a run on PostgreSQL was asked for with no DSN to make its database on; says so."""
    if getattr(args, "backend", "postgres") == "postgres" and not args.dsn:
        print("--dsn (or MCP_JOBS_BENCH_DSN) is required", file=sys.stderr)
        return True
    return False


def with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + name))


async def server_settings(dsn: str) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:
        # current_setting() as SHOW prints it ("128MB"): pg_settings' raw value is in the unit's
        # multiples ("16384" of "8kB"), which pasted together read as "163848kB".
        rows = await conn.fetch(
            "SELECT name, current_setting(name) AS value FROM pg_settings"
            " WHERE name = ANY($1::text[])",
            list(SETTINGS),
        )
    finally:
        await conn.close()
    return {r["name"]: r["value"] for r in rows}


@asynccontextmanager
async def fresh_database(dsn: str | None, backend: Backend, label: str) -> AsyncIterator[str]:
    """Yield the URL of an empty database (PostgreSQL on the server of `dsn`, or a SQLite file
    in a temporary directory); drop it afterwards."""
    tag = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")[:40]
    name = f"bench_{tag}_{secrets.token_hex(3)}"
    if backend == "sqlite":
        folder = tempfile.mkdtemp(prefix=f"{name}_")
        try:
            yield f"sqlite:///{os.path.join(folder, 'jobs.db')}"
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    if dsn is None:
        raise ValueError("a PostgreSQL system needs a DSN")
    admin = await asyncpg.connect(dsn)
    try:
        # Identifiers cannot be parameters; `name` is built above from [a-z0-9_] only.
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield with_database(dsn, name)
    finally:
        admin = await asyncpg.connect(dsn)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()
