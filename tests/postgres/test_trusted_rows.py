"""A job row read without validation (rows.job, claims) builds the same record validation
builds: equal, with the same fields set, dumped alike; its JSON text decoded the same way."""

from __future__ import annotations

import asyncpg
import pytest
from pydantic import ValidationError

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver, rows
from engine.settle import Settler
from schemas.jobs import ClaimedJob, JobRecord, NackOptions
from schemas.progress import Progress
from tests.postgres.builders import failure, request


def assert_same(trusted: JobRecord, validated: JobRecord) -> None:
    assert trusted == validated
    assert trusted.model_fields_set == validated.model_fields_set
    assert trusted.model_dump() == validated.model_dump()
    assert repr(trusted) == repr(validated)


async def test_every_kind_of_job_row_reads_as_validation_reads_it(
    driver: PostgresDriver,
    settler: Settler,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
) -> None:
    now = clock.now_ms()
    plain, tenanted, failed, legacy, done, reported = await driver.enqueue(
        [
            request(now, key="plain"),
            request(now, key="tenanted", tenant_id="acme"),
            request(now, key="failed"),
            request(now, key="legacy"),
            request(now, key="done", tenant_id="acme", input={"nested": [1, {"a": None}]}),
            request(now, key="reported"),
        ]
    )
    claimed = {c.record.id: c for c in await driver.claim("w", 10, 60_000)}
    await driver.nack(failed.id, claimed[failed.id].token, NackOptions(error=failure("json")))
    await driver.nack(legacy.id, claimed[legacy.id].token, NackOptions(error=failure("x")))
    # Written before errors were stored structured: a plain "CODE: cause" line.
    await sql.execute(
        "UPDATE mcp_jobs.jobs SET last_error = 'JOB_TIMEOUT: too slow' WHERE id = $1", legacy.id
    )
    await settler.ack(done.id, claimed[done.id].token, {"out": [1.5, "two", None]})
    progress = Progress(done=1, total=4, message="a quarter", at=now, attempt=1)
    assert await driver.save_progress(reported.id, claimed[reported.id].token, progress)

    found = await sql.fetch("SELECT * FROM mcp_jobs.jobs")
    by_id = {row["id"]: row for row in found}
    assert set(by_id) == {plain.id, tenanted.id, failed.id, legacy.id, done.id, reported.id}
    for row in found:
        assert_same(rows.job(row), rows.validated_job(row))
    # Each kind of value really was there to compare.
    records = {row["id"]: rows.job(row) for row in found}
    assert records[tenanted.id].tenant_id == "acme" and records[plain.id].tenant_id is None
    stored, old = records[failed.id].last_error, records[legacy.id].last_error
    assert stored is not None and stored.cause == "json"
    assert old is not None and old.code == "JOB_TIMEOUT"
    assert records[done.id].output == {"out": [1.5, "two", None]}
    assert records[reported.id].progress == progress


async def test_a_claimed_job_is_the_one_validation_builds(
    driver: PostgresDriver, clock: ManualClock
) -> None:
    await driver.enqueue([request(clock.now_ms(), key="a", tenant_id="t")])
    (claimed,) = await driver.claim("w", 1, 60_000)
    validated = ClaimedJob.model_validate(
        {
            "record": claimed.record.model_dump(),
            "token": claimed.token,
            "lease_expires_at": claimed.lease_expires_at,
            "has_steps": claimed.has_steps,
        }
    )
    assert claimed == validated
    assert repr(claimed) == repr(validated)
    assert claimed.model_fields_set == validated.model_fields_set
    # A copy with a change works as on a validated model (its fields set is its own).
    moved = claimed.model_copy(update={"token": "other"})
    assert moved.token == "other" and claimed.token != "other"


async def test_a_row_without_some_columns_is_validated_instead(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    (job,) = await driver.enqueue([request(clock.now_ms())])
    # Without the optional columns: their defaults, as validation gives them.
    (row,) = await sql.fetch(
        "SELECT id, run_id, name, queue, tenant_id, idempotency_key, input, state, attempt,"
        " max_attempts, run_at, queued_at, created_at, updated_at, output FROM mcp_jobs.jobs"
    )
    assert_same(rows.job(row), rows.validated_job(row))
    assert rows.job(row).id == job.id and rows.job(row).progress is None
    # Without a required one: refused, never built half.
    (row,) = await sql.fetch("SELECT id, name, input, output, state FROM mcp_jobs.jobs")
    with pytest.raises(ValidationError):
        rows.job(row)
