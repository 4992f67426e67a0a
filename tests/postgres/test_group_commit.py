"""Group commit: concurrent acks, step writes and step reads share statements, yet each caller
gets its own outcome (JobSlotLostError for a stale token) only after its write committed."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.batch import GroupCommit, Item, settle_all
from engine.errors import JobSlotLostError
from schemas.jobs import ClaimedJob
from schemas.steps import StepRecord
from tests.postgres.builders import request


async def _claim(driver: PostgresDriver, now: int, count: int) -> list[ClaimedJob]:
    await driver.enqueue([request(now, key=f"k{i}") for i in range(count)])
    claimed = await driver.claim("w", count, 60_000)
    assert len(claimed) == count
    return claimed


async def test_queued_calls_share_the_next_flush_and_keep_their_own_outcome() -> None:
    sizes: list[list[int]] = []
    release = anyio.Event()

    async def flush(batch: Sequence[Item[int]]) -> None:
        sizes.append([item.value for item in batch])
        if len(sizes) == 1:
            await release.wait()  # the first flush stays in flight while the rest queue
        settle_all(batch, lambda item: ValueError(item.value) if item.value % 2 else None)

    queue: GroupCommit[int] = GroupCommit(flush)
    outcomes: dict[int, str] = {}

    async def call(value: int, key: str) -> None:
        try:
            await queue.submit(value, key)
            outcomes[value] = "ok"
        except ValueError:
            outcomes[value] = "refused"

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, 0, "a")
            await anyio.wait_all_tasks_blocked()
            for value, key in ((1, "b"), (2, "c"), (3, "c"), (4, "d")):
                tg.start_soon(call, value, key)
            await anyio.wait_all_tasks_blocked()
            release.set()
    # One flush in flight at a time; the queued calls went together, except the second "c".
    assert sizes == [[0], [1, 2, 4], [3]]
    assert outcomes == {0: "ok", 1: "refused", 2: "ok", 3: "refused", 4: "ok"}


async def test_a_call_cancelled_while_queued_never_runs() -> None:
    ran: list[int] = []
    release = anyio.Event()

    async def flush(batch: Sequence[Item[int]]) -> None:
        ran.extend(item.value for item in batch)
        if ran == [0]:
            await release.wait()
        settle_all(batch, lambda item: None)

    queue: GroupCommit[int] = GroupCommit(flush)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(queue.submit, 0, 0)
            await anyio.wait_all_tasks_blocked()
            with anyio.CancelScope() as scope:
                scope.cancel()
                await queue.submit(1, 1)
            tg.start_soon(queue.submit, 2, 2)
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert ran == [0, 2]


async def test_concurrent_acks_settle_each_job_and_refuse_each_stale_token(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    claimed = await _claim(driver, clock.now_ms(), 24)
    stale = {c.record.id for c in claimed[::3]}
    lost: set[str] = set()

    async def ack(c: ClaimedJob) -> None:
        token = "stale" if c.record.id in stale else c.token
        try:
            await driver.ack(c.record.id, token, {"id": c.record.id})
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
    driver: PostgresDriver, clock: ManualClock
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
                await driver.save_step(c.record.id, token, step(c, name))
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
    driver: PostgresDriver, clock: ManualClock, count: int
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
        await driver.save_step(c.record.id, c.token, record)
    await driver.ack(c.record.id, c.token, None)
    with pytest.raises(JobSlotLostError):
        await driver.ack(c.record.id, c.token, None)
    assert [s.output for s in await driver.load_steps(c.record.run_id)] == list(range(count))
    assert (await driver.get(c.record.id)).state == "done"
