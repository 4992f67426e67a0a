"""Rerun from a step on SQLite (engine/reruns.py), inside the executor's one write transaction
(BEGIN IMMEDIATE): read the row and its run's steps, plan with `engine.reruns.plan_rerun`, then
write the copied steps, the row and its event. A second rerun of the same job waits for the
first to commit and then finds it ready, so it is refused as a live job's retry is."""

from __future__ import annotations

from engine.drivers.sqlite import lifecycle
from engine.drivers.sqlite import queries as q
from engine.drivers.sqlite.codec import STEP_COLUMNS, dumps, step_from_row, step_params
from engine.drivers.sqlite.library import sqlite3
from engine.errors import JobDuplicateError
from engine.reruns import plan_rerun
from schemas.events import EventRecord
from schemas.jobs import JobRecord
from schemas.steps import StepRecord

# Copied steps are inserted in run order, so rowid (the tie-break of started_at) keeps it.
INSERT_STEP = """
INSERT INTO mcp_jobs_steps
    (job_id, run_id, name, status, output, error, started_at, finished_at, attempts)
VALUES (:job_id, :run_id, :name, :status, :output, :error, :started_at, :finished_at, :attempts)
"""
# Every column a rerun changes (UPDATE_JOB's, plus the run and its link, and the output).
UPDATE_RERUN = """
UPDATE mcp_jobs_jobs
SET run_id = :run_id, rerun_of = :rerun_of, state = :state, attempt = :attempt,
    run_at = :run_at, queued_at = :queued_at, updated_at = :updated_at,
    finished_at = :finished_at, output = :output, worker_id = NULL, lease_expires_at = NULL,
    cancel_requested = 0, token = NULL
WHERE id = :id
"""
RUN_STEPS = (
    f"SELECT {STEP_COLUMNS} FROM mcp_jobs_steps WHERE run_id = :run_id AND job_id = :job_id "
    "ORDER BY started_at, rowid"
)


def rerun(
    conn: sqlite3.Connection,
    job_id: str,
    tenant_id: str | None,
    from_step: str,
    include_cancelled: bool,
    actor: str | None,
    new_run_id: str,
    now: int,
) -> JobRecord:
    job = lifecycle.get(conn, job_id, tenant_id)
    steps = [step_from_row(r) for r in conn.execute(q.SELECT_STEPS, {"run_id": job.run_id})]
    plan = plan_rerun(job, steps, from_step, include_cancelled, new_run_id, now)
    holder = conn.execute(
        q.FIND_LIVE,
        {"name": job.name, "tenant_id": job.tenant_id, "idempotency_key": job.idempotency_key},
    ).fetchone()
    if holder is not None:
        raise JobDuplicateError(job.name, job.idempotency_key, holder[0], job.tenant_id)
    conn.executemany(INSERT_STEP, [step_params(step) for step in plan.copied])
    record = plan.record
    conn.execute(
        UPDATE_RERUN,
        {
            "id": job_id,
            "run_id": record.run_id,
            "rerun_of": record.rerun_of,
            "state": record.state,
            "attempt": record.attempt,
            "run_at": record.run_at,
            "queued_at": record.queued_at,
            "updated_at": record.updated_at,
            "finished_at": record.finished_at,
            "output": dumps(record.output),
        },
    )
    event = EventRecord(
        job_id=job_id,
        at=now,
        kind="requeued",
        actor=actor,
        tenant_id=job.tenant_id,
        data=plan.event_data,
    )
    lifecycle.record_event(conn, event)
    return record


def run_steps(
    conn: sqlite3.Connection, job_id: str, run_id: str, tenant_id: str | None
) -> list[StepRecord]:
    lifecycle.get(conn, job_id, tenant_id)
    return [step_from_row(r) for r in conn.execute(RUN_STEPS, {"run_id": run_id, "job_id": job_id})]
