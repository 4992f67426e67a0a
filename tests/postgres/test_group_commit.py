"""Group commit on PostgreSQL: concurrent acks, step writes and step reads share statements, yet
each caller gets its own outcome (JobSlotLostError for a stale token) only after its write
committed. The group commit itself is tested in tests/settle/test_settler.py."""

from __future__ import annotations

import anyio
import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.errors import JobSlotLostError
from engine.settle import Settler
from schemas.jobs import ClaimedJob
from schemas.steps import StepRecord
from tests.postgres.builders import request


async def _claim(driver: PostgresDriver, now: int, count: int) -> list[ClaimedJob]:
    await driver.enqueue([request(now, key=f"k{i}") for i in range(count)])
    claimed = await driver.claim("w", count, 60_000)
    assert len(claimed) == count
    return claimed


async def test_concurrent_acks_settle_each_job_and_refuse_each_stale_token(
    driver: PostgresDriver,
    settler: Settler,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
) -> None:
    claimed = await _claim(driver, clock.now_ms(), 24)
    stale = {c.record.id for c in claimed[::3]}
    lost: set[str] = set()

    async def ack(c: ClaimedJob) -> None:
        token = "stale" if c.record.id in stale else c.token
        try:
            await settler.ack(c.record.id, token, {"id": c.record.id})
        except JobSlotLostError as exc:
            assert exc.code == JobSlotLostError.code
            lost.add(c.record.id)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for c in claimed:
                tg.start_soon(ack, c)
    assert lost == stale
    found = await sql.fetch("SELECT id, state, output FROM mcp_jobs.jobs")
    states = {row["id"]: row["state"] for row in found}
    assert {i for i, s in states.items() if s == "running"} == stale
    assert {i for i, s in states.items() if s == "done"} == {c.record.id for c in claimed} - stale
    for row in found:
        if row["state"] == "done":
            assert row["output"] == f'{{"id": "{row["id"]}"}}'


async def test_concurrent_step_writes_and_reads_stay_per_job(
    driver: PostgresDriver, settler: Settler, clock: ManualClock
) -> None:
    claimed = await _claim(driver, clock.now_ms(), 12)
    stale = claimed[0]
    now = clock.now_ms()

    def step(c: ClaimedJob, name: str) -> StepRecord:
        return StepRecord(
            job_id=c.record.id,
            run_id=c.record.run_id,
            name=name,
            status="completed",
            output={"job": c.record.id, "step": name},
            started_at=now,
            finished_at=now,
            attempts=1,
        )

    lost: list[str] = []

    async def write(c: ClaimedJob) -> None:
        token = "stale" if c is stale else c.token
        try:
            for name in ("a", "b", "c"):
                await settler.save_step(c.record.id, token, step(c, name))
        except JobSlotLostError as exc:
            assert exc.code == JobSlotLostError.code
            lost.append(c.record.id)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for c in claimed:
                tg.start_soon(write, c)
    assert lost == [stale.record.id]

    loaded: dict[str, list[StepRecord]] = {}

    async def load(c: ClaimedJob) -> None:
        loaded[c.record.id] = await driver.load_steps(c.record.run_id)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for c in claimed:
                tg.start_soon(load, c)
    assert loaded[stale.record.id] == []
    for c in claimed[1:]:
        assert [s.name for s in loaded[c.record.id]] == ["a", "b", "c"]
        assert [s.output for s in loaded[c.record.id]] == [step(c, n).output for n in "abc"]


@pytest.mark.parametrize("count", [1, 3])
async def test_an_ack_after_its_step_writes_sees_them_committed(
    driver: PostgresDriver, settler: Settler, clock: ManualClock, count: int
) -> None:
    (c,) = await _claim(driver, clock.now_ms(), 1)
    now = clock.now_ms()
    for n in range(count):
        record = StepRecord(
            job_id=c.record.id,
            run_id=c.record.run_id,
            name=f"s{n}",
            status="completed",
            output=n,
            started_at=now,
            finished_at=now,
            attempts=1,
        )
        await settler.save_step(c.record.id, c.token, record)
    await settler.ack(c.record.id, c.token, None)
    with pytest.raises(JobSlotLostError):
        await settler.ack(c.record.id, c.token, None)
    assert [s.output for s in await driver.load_steps(c.record.run_id)] == list(range(count))
    assert (await driver.get(c.record.id)).state == "done"
