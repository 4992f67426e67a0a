"""The claim: one statement, FOR UPDATE SKIP LOCKED, a batch in (run_at, id) order, fenced."""

from __future__ import annotations

import anyio
import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.errors import JobsError
from engine.settle import Settler
from schemas.jobs import NackOptions
from tests.postgres.builders import failure, request
from tests.postgres.conftest import DriverFactory


async def test_claimers_on_separate_connections_never_share_a_job(
    make_driver: DriverFactory, clock: ManualClock
) -> None:
    drivers = [await make_driver() for _ in range(4)]
    now = clock.now_ms()
    enqueued = await drivers[0].enqueue([request(now, key=f"k{i}") for i in range(400)])
    taken: dict[str, list[str]] = {}

    async def drain(driver: PostgresDriver, name: str) -> None:
        while batch := await driver.claim(name, 7, 60_000):
            taken.setdefault(name, []).extend(c.record.id for c in batch)

    async with anyio.create_task_group() as tg:
        for n, d in enumerate(drivers):
            tg.start_soon(drain, d, f"w{n}")
    everything = [job_id for ids in taken.values() for job_id in ids]
    assert sorted(everything) == sorted(r.id for r in enqueued)  # each exactly once


async def test_a_row_locked_elsewhere_is_skipped_not_waited_for(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    now = clock.now_ms()
    first, second = await driver.enqueue(
        [request(now - 2, key="first"), request(now - 1, key="second")]
    )
    async with sql.transaction():
        await sql.execute("SELECT 1 FROM mcp_jobs.jobs WHERE id = $1 FOR UPDATE", first.id)
        with anyio.fail_after(5):
            claimed = await driver.claim("w", 10, 1000)
        assert [c.record.id for c in claimed] == [second.id]
    assert [c.record.id for c in await driver.claim("w", 10, 1000)] == [first.id]


async def test_a_batch_takes_the_due_rows_in_run_at_then_id_order(
    driver: PostgresDriver, clock: ManualClock
) -> None:
    now = clock.now_ms()
    results = await driver.enqueue(
        [
            request(now - 5, key="b", id="00000000000000000000000000000002"),
            request(now - 5, key="a", id="00000000000000000000000000000001"),
            request(now - 9, key="c", id="00000000000000000000000000000003"),
            request(now + 1, key="later"),
        ]
    )
    claimed = await driver.claim("w", 2, 1000)
    assert [c.record.id for c in claimed] == [results[2].id, results[1].id]
    assert [c.record.id for c in await driver.claim("w", 10, 1000)] == [results[0].id]


async def test_an_expired_lease_is_claimed_again_and_the_old_token_is_fenced(
    driver: PostgresDriver, settler: Settler, clock: ManualClock
) -> None:
    (r,) = await driver.enqueue([request(clock.now_ms())])
    (old,) = await driver.claim("w1", 1, 1_000)
    assert await driver.claim("w2", 1, 1_000) == []
    clock.advance(1_000)
    (new,) = await driver.claim("w2", 1, 1_000)
    assert (new.record.attempt, new.record.worker_id) == (2, "w2")
    assert new.token != old.token
    for call in (
        lambda: settler.ack(r.id, old.token),
        lambda: driver.nack(r.id, old.token, NackOptions(error=failure("late"))),
        lambda: driver.heartbeat(r.id, old.token, 1_000),
    ):
        with pytest.raises(JobsError) as raised:
            await call()
        assert raised.value.code == "JOB_SLOT_LOST"
    await settler.ack(r.id, new.token, {"ok": True})
    assert (await driver.get(r.id)).output == {"ok": True}


async def test_a_settled_job_refuses_a_second_settle(
    driver: PostgresDriver, settler: Settler, clock: ManualClock
) -> None:
    (r,) = await driver.enqueue([request(clock.now_ms())])
    (claimed,) = await driver.claim("w", 1, 1_000)
    await settler.ack(r.id, claimed.token)
    with pytest.raises(JobsError) as raised:
        await settler.ack(r.id, claimed.token)
    assert raised.value.code == "JOB_SLOT_LOST"


async def test_queues_restrict_the_claim(driver: PostgresDriver, clock: ManualClock) -> None:
    now = clock.now_ms()
    a, b = await driver.enqueue([request(now, key="a", queue="qa"), request(now, key="b")])
    assert [c.record.id for c in await driver.claim("w", 10, 1000, ["qa"])] == [a.id]
    assert await driver.claim("w", 10, 1000, []) == []
    assert [c.record.id for c in await driver.claim("w", 10, 1000, ["default"])] == [b.id]


async def test_an_abandoned_run_reads_its_steps_even_without_any_stored(
    driver: PostgresDriver, clock: ManualClock
) -> None:
    # Its stale holder may commit a step after the claim's snapshot: never assume none.
    await driver.enqueue([request(clock.now_ms())])
    (held,) = await driver.claim("w1", 1, 1_000)
    assert not held.has_steps
    clock.advance(1_000)
    (taken,) = await driver.claim("w2", 1, 1_000)
    assert taken.has_steps
