"""A job's row as stored, printed by the fix of a row the driver cannot read (STORE_DAMAGED).

The fix runs where this package is installed, as `mcp-jobs db report` does, and reads through
asyncpg alone: psql is seldom where the application runs.
"""

from __future__ import annotations

import asyncio
import shlex

import asyncpg

from engine.drivers.postgres.sql import with_schema
from engine.drivers.python_lines import python_line
from engine.drivers.urls import split_schema, url_word

# The columns a value of the wrong shape can sit in (jsonb, and the error's text), as text.
SHOWN = ("input", "output", "last_error", "progress")
_SELECT = "SELECT {columns} FROM {{schema}}.jobs WHERE id = $1".format(
    columns=", ".join(f"{c}::text AS {c}" for c in SHOWN)
)
_CODE = "import sys; from engine.drivers.postgres.stored import show_job; show_job(*sys.argv[1:])"


def show_job_line(url: str, schema: str, job_id: str) -> str:
    """The fix line printing job `job_id`'s row of the jobs table in `schema`."""
    return python_line(_CODE, url_word(url), shlex.quote(schema), shlex.quote(job_id))


def show_job(url: str, schema: str, job_id: str) -> None:
    """Print each of `SHOWN` of the job's row as stored, quoted, one per line."""
    for line in asyncio.run(_read(url, schema, job_id)):
        print(line)


async def _read(url: str, schema: str, job_id: str) -> list[str]:
    # No statement cache: the fix may go through a transaction pooler (PgBouncer).
    conn = await asyncpg.connect(split_schema(url)[0], statement_cache_size=0)
    try:
        row = await conn.fetchrow(with_schema(_SELECT, schema), job_id)
    finally:
        await conn.close()
    if row is None:
        return [f"no job {job_id} in {schema}.jobs"]
    return [f"{column}: {row[column]!r}" for column in SHOWN]
