"""A job row holding a value of a shape the driver never writes (by hand: jsonb takes any JSON):
reading it is STORE_DAMAGED naming the job, with a fix that prints the row's values as stored;
a list names it in its place and pages on; a claim that takes it settles it dead and hands out
the jobs beside it (a worker would stop claiming at all)."""

from __future__ import annotations

import asyncpg
import pytest

from engine import JobRegistry, Jobs, ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.errors import JobsError
from engine.testing.kit.test_published_caps import beat
from engine.testing.plugin import builtin_app_transaction
from schemas.jobs import NackOptions
from tests.postgres.builders import failure, request
from tests.postgres.conftest import DriverFactory
from tests.support.damaged_ledgers import (
    check_outbox_passes_over,
    check_pruner_forgets_a_damaged_descriptor,
)
from tests.support.damaged_rows import check_buried_on_claim, check_listed_in_place
from tests.support.fix_lines import run_fix

# An edit the driver never makes, and the line of the fix that shows the column as stored,
# before the claim and after it: a JSON value of the wrong shape, and counts no job can have
# (it ran with attempt -4, or went dead as if its lease had expired on each of its 0 attempts).
HAND_EDITS = [
    ("progress = '5'::jsonb", "progress: '5'", "progress: '5'"),
    ("max_attempts = 0", "max_attempts: 0", "max_attempts: 0"),
    ("attempt = -5", "attempt: -5", "attempt: -4"),
]


@pytest.mark.parametrize(("edit", "stored", "claimed"), HAND_EDITS)
@pytest.mark.parametrize("schema", ["mcp_jobs", "tenant_b"])
async def test_a_row_written_by_hand_is_damage_named_in_lists_and_buried_on_claim(
    make_driver: DriverFactory,
    sql: asyncpg.Connection[asyncpg.Record],
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    schema: str,
    edit: str,
    stored: str,
    claimed: str,
) -> None:
    driver = await make_driver(schema=schema)
    first, damaged, third = (request(clock.now_ms(), key=f"k{n}") for n in (1, 2, 3))
    await driver.enqueue([first, damaged, third])
    await sql.execute(f"UPDATE {schema}.jobs SET {edit} WHERE id = $1", damaged.id)

    with pytest.raises(JobsError) as raised:
        await driver.get(damaged.id)
    error = raised.value
    assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
    assert f"job {damaged.id}: ValidationError" in error.cause, error.cause
    assert stored.split(":")[0] in error.cause.lower(), error.cause
    assert stored in run_fix(error.fix).splitlines()  # the row as stored
    assert await check_listed_in_place(driver, third.id, damaged.id, first.id) == error.fix

    await check_buried_on_claim(driver, damaged.id, [first.id, third.id])
    assert "claimed a job that cannot be read; it is dead now (STORE_DAMAGED)" in caplog.text
    shown = run_fix(error.fix)  # its value as before, and the damage as its error
    assert claimed in shown.splitlines() and "STORE_DAMAGED" in shown, shown


async def test_an_event_written_by_hand_is_damage_named_with_its_job(
    driver: PostgresDriver, sql: asyncpg.Connection[asyncpg.Record], clock: ManualClock
) -> None:
    """An event's data that is JSON but no object: the job's trace is STORE_DAMAGED naming the
    job and the event, with a fix that prints the job's events as stored."""
    (job,) = await driver.enqueue([request(clock.now_ms())])
    (claimed,) = await driver.claim("w", 1, 60_000)
    await driver.nack(job.id, claimed.token, NackOptions(error=failure(), delay_ms=1_000))
    await sql.execute("UPDATE mcp_jobs.events SET data = '5'::jsonb WHERE job_id = $1", job.id)

    with pytest.raises(JobsError) as raised:
        await driver.load_trace(job.id)
    error = raised.value
    assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
    assert f"job {job.id}, event 'retried at " in error.cause, error.cause
    (shown,) = run_fix(error.fix).splitlines()
    assert shown.startswith("retried at ") and shown.endswith(": '5'"), shown
    assert (await driver.get(job.id)).state == "delayed"  # the job's own row reads as before


async def test_an_outbox_row_written_by_hand_is_passed_over(
    driver: PostgresDriver,
    pg_url: str,
    sql: asyncpg.Connection[asyncpg.Record],
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A staged row whose request jsonb is of a shape the driver never writes: the relay's claim
    hands out the rows beside it, and the row stays as stored, unpublished."""

    async def overwrite(row_id: str) -> None:
        await sql.execute("UPDATE mcp_jobs.outbox SET request = '5'::jsonb WHERE id = $1", row_id)

    requests = [request(clock.now_ms(), key=f"k{n}") for n in (1, 2)]
    await check_outbox_passes_over(
        driver, pg_url, builtin_app_transaction, requests, overwrite, caplog, clock.advance
    )
    stored = await sql.fetch("SELECT request::text, published_at FROM mcp_jobs.outbox ORDER BY id")
    assert sorted((r["request"] == "5", r["published_at"] is None) for r in stored) == [
        (False, False),
        (True, True),
    ]


async def test_a_descriptor_written_by_hand_is_forgotten_by_the_pruner(
    driver: PostgresDriver, sql: asyncpg.Connection[asyncpg.Record], clock: ManualClock
) -> None:
    registry = JobRegistry()
    jobs = Jobs(driver, registry=registry, clock=clock)

    async def spoil(name: str) -> None:
        await sql.execute(
            "UPDATE mcp_jobs.descriptors SET descriptor = '[1]' WHERE name = $1", name
        )

    await check_pruner_forgets_a_damaged_descriptor(jobs, registry, clock.advance, spoil)


async def test_caps_of_another_shape_read_as_a_worker_with_none(
    driver: PostgresDriver,
    sql: asyncpg.Connection[asyncpg.Record],
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A presence row whose caps another program overwrote: the worker stays live (its beats
    are what counts), reads as one with no caps, logged once; its next beat writes them anew."""
    now = clock.now_ms()
    await driver.worker_seen(beat("capped", now, {"queue:emails": 3}))
    await sql.execute("UPDATE mcp_jobs.workers SET caps = '[1, 2]'::jsonb WHERE id = 'capped'")
    for _ in range(2):
        assert [(w.id, w.caps) for w in await driver.live_workers(0)] == [("capped", None)]
    assert sum("cannot be read" in r.getMessage() for r in caplog.records) == 1, caplog.text
    await driver.worker_seen(beat("capped", now, {"queue:emails": 3}))
    assert [w.caps for w in await driver.live_workers(0)] == [{"queue:emails": 3}]
