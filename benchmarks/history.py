"""Settled history written straight into a driver's tables, fast: `INSERT … SELECT
generate_series` on PostgreSQL, a recursive CTE on SQLite. Used by workload 7 and
`benchmarks.prune_during_drain` to build a table with a year's worth of finished jobs in seconds.

The rows match each driver's `schema.sql` column for column, as the driver itself writes a
settled job: a run id, an idempotency key, `{}` input, `finished_at` set, no lease, and one
completed step each. Ids follow `engine.ids` (48 bits of ms, a sequence, random-looking digits)
stamped at the row's creation time, so the settled rows sort before anything enqueued now.

The mix of states, names, queues and tenants is fixed (`state_of` and the SQL below agree):
the first `EACH_STATE_FIRST` rows of every call cycle through the four settled states, so a
state filter finds a full page at any size; after them 1 in 100 is dead, 1 in 100 failed, 1 in
100 cancelled and the rest done. A quarter are `bench_steps`, the rest `bench_noop`; a fifth are
in queue `other`, the rest in `bench`; tenants `t0`…`t9` in turn.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import asyncpg

DAY_MS = 86_400_000
# Rows at the head of each seeding call that cycle through the four settled states.
EACH_STATE_FIRST = 4 * 60
STATES = ("done", "dead", "failed", "cancelled")
NAMES = ("bench_noop", "bench_steps")
QUEUES = ("bench", "other")
TENANTS = 10


def state_of(g: int) -> str:
    """The settled state of row `g` (1-based), as the SQL spells it."""
    if g <= EACH_STATE_FIRST:
        return STATES[g % 4]
    return {0: "dead", 1: "failed", 2: "cancelled"}.get(g % 100, "done")


@dataclass(frozen=True)
class Seed:
    """`rows` settled jobs, finished evenly over `span_ms` before `now`, each with one step."""

    rows: int
    now: int
    span_ms: int = 30 * DAY_MS
    # Distinguishes the rows of one call from another's (ids, run ids, keys).
    tag: str = "h"

    def finished_at_sql(self, g: str) -> str:
        step = max(1, self.span_ms // max(1, self.rows))
        return f"({self.now - self.span_ms} + ({g})::bigint * {step})"


_PG_STATE = (
    f"CASE WHEN g <= {EACH_STATE_FIRST} THEN (ARRAY['done','dead','failed','cancelled'])[1 + g % 4]"
    " WHEN g % 100 = 0 THEN 'dead' WHEN g % 100 = 1 THEN 'failed'"
    " WHEN g % 100 = 2 THEN 'cancelled' ELSE 'done' END"
)


def _pg_jobs(schema: str, seed: Seed) -> str:
    fin = seed.finished_at_sql("g")
    job_id = f"lpad(to_hex(({fin} << 16) + g % 65536), 16, '0') || lpad(to_hex(g), 16, '0')"
    return f"""
      INSERT INTO "{schema}".jobs (id, run_id, name, queue, tenant_id, idempotency_key, input,
        state, attempt, max_attempts, run_at, queued_at, created_at, updated_at, finished_at,
        output, last_error)
      SELECT {job_id}, '{seed.tag}r' || g,
             CASE WHEN g % 4 = 0 THEN 'bench_steps' ELSE 'bench_noop' END,
             CASE WHEN g % 5 = 0 THEN 'other' ELSE 'bench' END,
             't' || (g % {TENANTS}), '{seed.tag}k' || g, '{{}}'::jsonb,
             {_PG_STATE}, 1, 3, {fin} - 20, {fin} - 20, {fin} - 50, {fin}, {fin},
             NULL, NULL
        FROM generate_series(1, {seed.rows}) g"""


def _pg_steps(schema: str, seed: Seed) -> str:
    fin = seed.finished_at_sql("g")
    job_id = f"lpad(to_hex(({fin} << 16) + g % 65536), 16, '0') || lpad(to_hex(g), 16, '0')"
    return f"""
      INSERT INTO "{schema}".steps (run_id, name, job_id, status, output, started_at,
        finished_at, attempts)
      SELECT '{seed.tag}r' || g, 'step-0', {job_id}, 'completed', '1'::jsonb, {fin} - 10,
             {fin} - 5, 1
        FROM generate_series(1, {seed.rows}) g"""


async def seed_postgres(
    url: str, seed: Seed, *, schema: str = "mcp_jobs", analyze: bool = True
) -> None:
    """Write `seed.rows` settled jobs and their steps; then VACUUM ANALYZE (what autovacuum
    does to a table after a bulk load), unless `analyze` is False: the jobs, their steps, and
    the dead and failed counts, whose few rows the load's trigger updated once a dead job."""
    conn = await asyncpg.connect(url)
    try:
        if seed.rows > 0:
            await conn.execute(_pg_jobs(schema, seed))
            await conn.execute(_pg_steps(schema, seed))
        if analyze:
            await conn.execute(f'VACUUM ANALYZE "{schema}".jobs')
            await conn.execute(f'VACUUM ANALYZE "{schema}".steps')
            await conn.execute(f'VACUUM ANALYZE "{schema}".dead_counts')
    finally:
        await conn.close()


async def long_trace_postgres(
    url: str, job_id: str, steps: int, now: int, *, schema: str = "mcp_jobs"
) -> None:
    """One done job `job_id` with `steps` completed steps (a large backfill's trace)."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            f"""INSERT INTO "{schema}".jobs (id, run_id, name, queue, idempotency_key, input,
                  state, attempt, max_attempts, run_at, queued_at, created_at, updated_at,
                  finished_at)
                VALUES ($1, $1 || 'run', 'bench_steps', 'bench', $1, '{{}}', 'done', 1, 3,
                        $2, $2, $2, $3, $3)""",
            job_id,
            now - steps - 1_000,
            now,
        )
        await conn.execute(
            f"""INSERT INTO "{schema}".steps (run_id, name, job_id, status, output,
                  started_at, finished_at, attempts)
                SELECT $1 || 'run', 'step-' || lpad(g::text, 6, '0'), $1, 'completed',
                       to_jsonb(g), $2::bigint + g, $2::bigint + g, 1
                  FROM generate_series(1, $3::int) g""",
            job_id,
            now - steps - 1_000,
            steps,
        )
    finally:
        await conn.close()


def sqlite_path(url: str) -> str:
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        raise ValueError(f"not a SQLite URL: {url}")
    return url[len(prefix) :]


_SQLITE_STATE = (
    f"CASE WHEN g <= {EACH_STATE_FIRST} THEN"
    " (CASE g % 4 WHEN 0 THEN 'done' WHEN 1 THEN 'dead' WHEN 2 THEN 'failed' ELSE 'cancelled' END)"
    " WHEN g % 100 = 0 THEN 'dead' WHEN g % 100 = 1 THEN 'failed'"
    " WHEN g % 100 = 2 THEN 'cancelled' ELSE 'done' END"
)


def seed_sqlite(url: str, seed: Seed) -> None:
    """The same rows on SQLite, in one transaction. No ANALYZE: the driver never runs one."""
    if seed.rows <= 0:
        return
    fin = seed.finished_at_sql("g").replace("::bigint", "")
    job_id = f"printf('%016x%016x', ({fin} << 16) + g % 65536, g)"
    series = (
        f"WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < {seed.rows})"
    )
    db = sqlite3.connect(sqlite_path(url), timeout=60)
    try:
        with db:
            db.execute(
                f"""INSERT INTO mcp_jobs_jobs (id, run_id, name, queue, tenant_id,
                      idempotency_key, input, state, attempt, max_attempts, run_at, queued_at,
                      created_at, updated_at, finished_at)
                    {series}
                    SELECT {job_id}, '{seed.tag}r' || g,
                           CASE WHEN g % 4 = 0 THEN 'bench_steps' ELSE 'bench_noop' END,
                           CASE WHEN g % 5 = 0 THEN 'other' ELSE 'bench' END,
                           't' || (g % {TENANTS}), '{seed.tag}k' || g, '{{}}', {_SQLITE_STATE},
                           1, 3, {fin} - 20, {fin} - 20, {fin} - 50, {fin}, {fin}
                      FROM s"""
            )
            db.execute(
                f"""INSERT INTO mcp_jobs_steps (run_id, name, job_id, status, output,
                      started_at, finished_at, attempts)
                    {series}
                    SELECT '{seed.tag}r' || g, 'step-0', {job_id}, 'completed', '1',
                           {fin} - 10, {fin} - 5, 1
                      FROM s"""
            )
    finally:
        db.close()


def long_trace_sqlite(url: str, job_id: str, steps: int, now: int) -> None:
    start = now - steps - 1_000
    db = sqlite3.connect(sqlite_path(url), timeout=60)
    try:
        with db:
            db.execute(
                """INSERT INTO mcp_jobs_jobs (id, run_id, name, queue, idempotency_key, input,
                     state, attempt, max_attempts, run_at, queued_at, created_at, updated_at,
                     finished_at)
                   VALUES (?, ? || 'run', 'bench_steps', 'bench', ?, '{}', 'done', 1, 3,
                           ?, ?, ?, ?, ?)""",
                (job_id, job_id, job_id, start, start, start, now, now),
            )
            db.executemany(
                """INSERT INTO mcp_jobs_steps (run_id, name, job_id, status, output,
                     started_at, finished_at, attempts)
                   VALUES (?, ?, ?, 'completed', ?, ?, ?, 1)""",
                (
                    (f"{job_id}run", f"step-{g:06d}", job_id, str(g), start + g, start + g)
                    for g in range(1, steps + 1)
                ),
            )
    finally:
        db.close()


async def seed(url: str, spec: Seed, *, analyze: bool = True) -> None:
    """`spec` on whichever backend `url` names."""
    if url.startswith("sqlite"):
        seed_sqlite(url, spec)
    else:
        await seed_postgres(url, spec, analyze=analyze)


async def analyze(url: str, *, schema: str = "mcp_jobs") -> None:
    """After a bulk load: VACUUM ANALYZE on PostgreSQL (as autovacuum would); nothing on SQLite,
    whose driver never analyzes."""
    if url.startswith("sqlite"):
        return
    await seed_postgres(url, Seed(rows=0, now=0), schema=schema, analyze=True)


async def long_trace(url: str, job_id: str, steps: int, now: int) -> None:
    if url.startswith("sqlite"):
        long_trace_sqlite(url, job_id, steps, now)
    else:
        await long_trace_postgres(url, job_id, steps, now)
