"""Rerun from a step on PostgreSQL (engine/reruns.py), in one transaction: lock the job row,
read its run's steps in run order, plan with `engine.reruns.plan_rerun` (the rule the memory and
SQLite drivers use), then copy the kept steps into the new run server-side (their stored jsonb as
is, in run order so `seq` keeps it), update the row, log the `requeued` event and record the
rerun in `reruns`. A concurrent rerun of the same job waits on the row lock, then finds it ready
and is refused. Not repeated through a broken connection: a second run would rerun twice; run
again when the server rolled it back, as nothing of it was written (`Connections.atomic`).
"""

from __future__ import annotations

import asyncpg

from engine.drivers.postgres import rows
from engine.drivers.postgres.connections import Connections
from engine.drivers.postgres.schema_version import Conn
from engine.drivers.postgres.sql import with_schema
from engine.errors import JobDuplicateError, JobNotFoundError
from engine.reruns import plan_rerun
from schemas.jobs import JobRecord
from schemas.steps import StepRecord

LOCK_JOB = """
SELECT * FROM {schema}.jobs WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2) FOR UPDATE
"""
STEPS_IN_ORDER = "SELECT * FROM {schema}.steps WHERE run_id = $1 ORDER BY started_at, seq"
# The dedupe predicate of the live-key index (queries.sql `retry`'s holder spells it alike).
HOLDER = """
SELECT id FROM {schema}.jobs
 WHERE name = $1 AND coalesce(tenant_id, '') = coalesce($2::text, '')
   AND idempotency_key = $3 AND state IN ('ready', 'delayed', 'running', 'suspended')
 LIMIT 1
"""
COPY_STEPS = """
INSERT INTO {schema}.steps
    (run_id, name, job_id, status, output, error, started_at, finished_at, attempts)
SELECT $2, name, job_id, status, output, error, started_at, finished_at, attempts
  FROM {schema}.steps
 WHERE run_id = $1 AND name = ANY($3::text[])
 ORDER BY started_at, seq
"""
UPDATE_JOB = """
UPDATE {schema}.jobs
   SET run_id = $2, rerun_of = $3, state = $4, attempt = $5, run_at = $6, queued_at = $7,
       updated_at = $8, finished_at = NULL, output = NULL, cancel_requested = false,
       worker_id = NULL, lease_expires_at = NULL, lease_token = NULL
 WHERE id = $1
RETURNING *
"""
LOG_EVENT = """
INSERT INTO {schema}.events (job_id, at, kind, actor, tenant_id, data)
VALUES ($1, $2, 'requeued', $3, $4, $5::jsonb)
"""
RECORD_RERUN = """
INSERT INTO {schema}.reruns (run_id, job_id, previous_run_id, from_step, at)
VALUES ($1, $2, $3, $4, $5)
"""
RUN_STEPS = """
SELECT * FROM {schema}.steps WHERE run_id = $1 AND job_id = $2 ORDER BY started_at, seq
"""
FIND_JOB = "SELECT 1 FROM {schema}.jobs WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)"


async def rerun(
    db: Connections,
    job_id: str,
    tenant_id: str | None,
    from_step: str,
    include_cancelled: bool,
    actor: str | None,
    new_run_id: str,
    now: int,
) -> JobRecord:
    def q(text: str) -> str:
        return with_schema(text, db.schema)

    async def once(conn: Conn) -> JobRecord:
        async with conn.transaction():
            found = await conn.fetchrow(q(LOCK_JOB), job_id, tenant_id)
            if found is None:
                raise JobNotFoundError(job_id, tenant_id)
            job = rows.record(found, db)
            steps = [rows.step(r) for r in await conn.fetch(q(STEPS_IN_ORDER), job.run_id)]
            plan = plan_rerun(job, steps, from_step, include_cancelled, new_run_id, now)
            holder = await conn.fetchval(q(HOLDER), job.name, job.tenant_id, job.idempotency_key)
            if holder is not None:
                raise JobDuplicateError(job.name, job.idempotency_key, holder, job.tenant_id)
            kept = [step.name for step in plan.copied]
            await conn.execute(q(COPY_STEPS), job.run_id, new_run_id, kept)
            r = plan.record
            row = await conn.fetchrow(
                q(UPDATE_JOB),
                job_id,
                r.run_id,
                r.rerun_of,
                r.state,
                r.attempt,
                r.run_at,
                r.queued_at,
                r.updated_at,
            )
            if row is None:  # the row is locked by this transaction: it cannot be gone
                raise JobNotFoundError(job_id, tenant_id)
            data = rows.dump(plan.event_data)
            await conn.execute(q(LOG_EVENT), job_id, now, actor, job.tenant_id, data)
            await conn.execute(q(RECORD_RERUN), new_run_id, job_id, job.run_id, from_step, now)
            await conn.execute("SELECT pg_notify($1::text, '')", db.channel)
            return rows.record(row, db)

    async def twice(conn: Conn) -> JobRecord:
        try:
            return await once(conn)
        except asyncpg.UniqueViolationError:
            # A live row took the key between our look and our write: look again (refused).
            return await once(conn)

    return await db.atomic(twice)


async def run_steps(
    db: Connections, job_id: str, run_id: str, tenant_id: str | None
) -> list[StepRecord]:
    find, read = with_schema(FIND_JOB, db.schema), with_schema(RUN_STEPS, db.schema)

    async def op(conn: Conn) -> list[StepRecord]:
        if await conn.fetchval(find, job_id, tenant_id) is None:
            raise JobNotFoundError(job_id, tenant_id)
        return [rows.step(r) for r in await conn.fetch(read, run_id, job_id)]

    return await db.idempotent(op)
