"""The operator's writes (cancel, retry, a bulk action, a prune) run again a transaction the
server rolled back, as the enqueue, claim and settle paths do (test_rollbacks.py): nothing of it
was written, so one call still leaves exactly what one successful call leaves, one audit event
included. One that keeps being rolled back fails at the retry deadline with the contention fix.
"""

from __future__ import annotations

import asyncpg
import pytest

from engine import JobRegistry, Jobs, ManualClock
from engine.driver_errors import DriverUnavailableError
from engine.drivers.postgres import PostgresDriver
from engine.drivers.urls import report_fix
from engine.retention import Cutoffs, PruneCount, PruneRule
from mcp_jobs.config import Settings
from mcp_jobs.operations.bulk import BulkFilter, bulk_command
from mcp_jobs.operations.scope import Scope
from schemas.jobs import NackOptions
from tests.postgres.builders import failure, request
from tests.postgres.conftest import DriverFactory
from tests.postgres.refusals import (
    RETRY_DEADLINE_MS,
    ROLLED_BACK,
    refuse,
    refused_so_far,
)
from tests.postgres.waiting import CountingClock, pumped
from tests.support.fix_lines import run_fix

ACTOR = "operator@test"


async def _dead(driver: PostgresDriver, clock: ManualClock, key: str) -> str:
    """One job dead-lettered now."""
    (enqueued,) = await driver.enqueue([request(clock.now_ms(), key=key)])
    (claimed,) = await driver.claim("w", 1, 60_000)
    options = NackOptions(error=failure(), dead_letter=True)
    await driver.nack(enqueued.id, claimed.token, options)
    return enqueued.id


async def _events(sql: asyncpg.Connection[asyncpg.Record], kind: str) -> list[tuple[str, str]]:
    found = await sql.fetch(
        "SELECT job_id, actor FROM mcp_jobs.events WHERE kind = $1 ORDER BY job_id", kind
    )
    return [(r["job_id"], r["actor"]) for r in found]


async def _states(sql: asyncpg.Connection[asyncpg.Record]) -> list[tuple[str, str]]:
    found = await sql.fetch("SELECT id, state FROM mcp_jobs.jobs ORDER BY id")
    return [(r["id"], r["state"]) for r in found]


@pytest.mark.parametrize("sqlstate", ROLLED_BACK)
async def test_a_cancel_rolled_back_twice_cancels_once(
    make_driver: DriverFactory,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    sqlstate: str,
) -> None:
    retry = CountingClock()
    driver = await make_driver(retry_clock=retry, listen=False)
    (enqueued,) = await driver.enqueue([request(clock.now_ms())])
    await refuse(sql, "UPDATE", sqlstate, times=2)
    record = await pumped(retry, lambda: driver.cancel(enqueued.id, None, ACTOR))
    assert record.state == "cancelled"
    assert await refused_so_far(sql) == 3  # two refusals, then the cancel that went through
    assert await _states(sql) == [(enqueued.id, "cancelled")]
    assert await _events(sql, "cancelled") == [(enqueued.id, ACTOR)]


async def test_a_retry_of_a_dead_job_rolled_back_twice_requeues_it_once(
    make_driver: DriverFactory, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    retry = CountingClock()
    driver = await make_driver(retry_clock=retry, listen=False)
    job_id = await _dead(driver, clock, "k")
    await refuse(sql, "UPDATE", "40P01", times=2)
    record = await pumped(retry, lambda: driver.retry(job_id, None, False, ACTOR))
    assert (record.state, record.attempt) == ("ready", 0)
    assert await refused_so_far(sql) == 3
    assert await _states(sql) == [(job_id, "ready")]
    assert await _events(sql, "requeued") == [(job_id, ACTOR)]


async def test_a_bulk_retry_rolled_back_twice_requeues_every_planned_job_once(
    make_driver: DriverFactory, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    retry = CountingClock()
    driver = await make_driver(retry_clock=retry, listen=False)
    ids = sorted([await _dead(driver, clock, "a"), await _dead(driver, clock, "b")])
    jobs = Jobs(driver, registry=JobRegistry(), clock=clock)
    scope = Scope(jobs=jobs, settings=Settings(), tool="jobs retry-all", actor=ACTOR, face="cli")
    await refuse(sql, "UPDATE", "40001", times=2)
    done = await pumped(
        retry,
        lambda: bulk_command(scope, "retry", BulkFilter(), act=True, words=["jobs", "retry-all"]),
    )
    assert done.outcome is not None
    assert done.outcome.skipped == [] and sorted(done.outcome.acted_ids) == ids
    assert await refused_so_far(sql) == 4  # two refusals, then one requeue per job
    assert await _states(sql) == [(job_id, "ready") for job_id in ids]
    assert await _events(sql, "requeued") == [(job_id, ACTOR) for job_id in ids]


async def test_a_prune_rolled_back_twice_deletes_one_batch(
    make_driver: DriverFactory, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    retry = CountingClock()
    driver = await make_driver(retry_clock=retry, listen=False)
    ids = []
    for n in range(3):
        (enqueued,) = await driver.enqueue([request(clock.now_ms(), key=f"k{n}")])
        await driver.cancel(enqueued.id, None, ACTOR)
        ids.append(enqueued.id)
        clock.advance(1_000)
    cutoffs = Cutoffs((PruneRule("cancelled", clock.now_ms()),))
    await refuse(sql, "DELETE", "55P03", times=2)
    pruned = await pumped(retry, lambda: driver.prune(cutoffs, 2))
    assert pruned == [PruneCount("cancelled", "default", 2)]
    assert await refused_so_far(sql) == 3
    # The oldest two went, with their events; a second batch was not taken.
    assert await _states(sql) == [(ids[2], "cancelled")]
    assert await _events(sql, "cancelled") == [(ids[2], ACTOR)]


async def test_a_cancel_rolled_back_every_time_fails_at_the_retry_deadline_with_the_fix(
    make_driver: DriverFactory, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    retry = CountingClock()
    driver = await make_driver(retry_clock=retry, listen=False)
    (enqueued,) = await driver.enqueue([request(clock.now_ms())])
    await refuse(sql, "UPDATE", "40P01", times=1_000_000)
    with pytest.raises(DriverUnavailableError) as caught:
        await pumped(retry, lambda: driver.cancel(enqueued.id, None, ACTOR), step_ms=500)
    error = caught.value
    assert error.retryable and error.details is not None
    assert error.details["tried_ms"] >= RETRY_DEADLINE_MS and error.details["tries"] > 2
    assert RETRY_DEADLINE_MS <= retry.now_ms() < 2 * RETRY_DEADLINE_MS
    assert "rolled the transaction back each time" in error.cause and "40P01" in error.cause
    assert error.fix == report_fix(driver.url)
    assert "transactions open" in run_fix(error.fix)
    assert await _states(sql) == [(enqueued.id, "ready")]
    assert await _events(sql, "cancelled") == []
