"""A test's SQLite jobs database made before a command reads it: a command that only reads or
acts on stored jobs creates none (mcp_jobs/cli/database_file.py)."""

from __future__ import annotations

import anyio

from engine import JobRegistry, connect


def migrated(url: str) -> str:
    """`url`'s database, created and migrated (as `mcp-jobs db migrate` does), silently."""

    async def create() -> None:
        jobs = await connect(url, registry=JobRegistry())
        await jobs.close()

    anyio.run(create)
    return url
