"""A job's row as stored, printed by the fix of a row the driver cannot read (STORE_DAMAGED).

The fix runs where this package is installed, as `mcp-jobs db report` does, and reads through
asyncpg alone: psql is seldom where the application runs.
"""

from __future__ import annotations

import asyncio

import asyncpg

from engine.drivers.damage import JOB_COUNT_COLUMNS, JOB_JSON_COLUMNS
from engine.drivers.postgres.sql import with_schema
from engine.drivers.python_lines import package_line
from engine.drivers.urls import split_schema, url_word
from engine.shell_words import shell_word

# jsonb (and the error's text) as text, the counts as numbers.
SHOWN = (*JOB_JSON_COLUMNS, *JOB_COUNT_COLUMNS)
_JOB = "SELECT {columns} FROM {{schema}}.jobs WHERE id = $1".format(
    columns=", ".join([*(f"{c}::text AS {c}" for c in JOB_JSON_COLUMNS), *JOB_COUNT_COLUMNS])
)
_EVENTS = "SELECT kind, at, data::text AS data FROM {schema}.events WHERE job_id = $1 ORDER BY id"
_CODE = "import sys; from engine.drivers.postgres.stored import show_job; show_job(*sys.argv[1:])"


def show_job_line(url: str, schema: str, job_id: str, kind: str = "job") -> str:
    """The fix line printing job `job_id`'s row of the jobs table in `schema`, or its events
    (`kind` "event")."""
    words = (url_word(url), shell_word(schema), shell_word(job_id), kind)
    return package_line(_CODE, *words)


def show_job(url: str, schema: str, job_id: str, kind: str = "job") -> None:
    """Print the job's row as stored, each of `SHOWN` quoted on a line of its own; or, for
    `kind` "event", each of its events as "kind at ms: data"."""
    for line in asyncio.run(_read(url, schema, job_id, kind)):
        print(line)


async def _read(url: str, schema: str, job_id: str, kind: str) -> list[str]:
    # No statement cache: the fix may go through a transaction pooler (PgBouncer).
    conn = await asyncpg.connect(split_schema(url)[0], statement_cache_size=0)
    try:
        if kind == "event":
            found = await conn.fetch(with_schema(_EVENTS, schema), job_id)
            return [f"{e['kind']} at {e['at']}: {e['data']!r}" for e in found]
        row = await conn.fetchrow(with_schema(_JOB, schema), job_id)
    finally:
        await conn.close()
    if row is None:
        return [f"no job {job_id} in {schema}.jobs"]
    return [f"{column}: {row[column]!r}" for column in SHOWN]
