"""The second line of defence behind the engine's output rule: a group-committed ack or step
write whose statement PostgreSQL refuses for one item's value (a data error) is split, so the
other items commit and only the bad one's caller gets a typed, terminal error."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import anyio
import asyncpg
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, Retry, Worker, connect, job
from engine.driver_errors import DriverUnavailableError
from engine.drivers.base import AckWrite, StepWrite
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.batch import flush_apart
from engine.drivers.postgres.faults import data_error
from engine.errors import InvalidArgumentError, JobOutputInvalidError, JobsError, JobSlotLostError
from engine.settle import Settler
from schemas.jobs import ClaimedJob
from schemas.steps import StepRecord
from tests.postgres.builders import request

COUNT = 16
BAD = 5
# Values jsonb refuses that the engine's rule would have stopped: sent here past that rule.
BAD_VALUES: dict[str, tuple[Any, str]] = {
    "nan": (float("nan"), "$"),
    "nul": ("a\x00b", "$"),
    "lone-surrogate": ("\ud800", "$"),
    "nul-in-a-dict": ({"rows": ["ok", "x\x00"]}, "$.rows[1]"),
}


async def _claim(driver: PostgresDriver, now: int) -> list[ClaimedJob]:
    await driver.enqueue([request(now, key=f"k{i}") for i in range(COUNT)])
    claimed = await driver.claim("w", COUNT, 60_000)
    assert len(claimed) == COUNT
    return claimed


def _spied(driver: PostgresDriver, monkeypatch: pytest.MonkeyPatch) -> tuple[Settler, list[int]]:
    """A Settler over `driver` whose set-wise writes record the size of each call."""
    sizes: list[int] = []
    ack_many, save_steps_many = driver.ack_many, driver.save_steps_many

    async def acks(writes: Sequence[AckWrite]) -> list[JobsError | None]:
        sizes.append(len(writes))
        return await ack_many(writes)

    async def steps(writes: Sequence[StepWrite]) -> list[JobsError | None]:
        sizes.append(len(writes))
        return await save_steps_many(writes)

    monkeypatch.setattr(driver, "ack_many", acks)
    monkeypatch.setattr(driver, "save_steps_many", steps)
    return Settler(driver), sizes


def _assert_refused(exc: BaseException, path: str) -> None:
    assert isinstance(exc, JobsError)
    assert exc.code == JobOutputInvalidError.code and not exc.retryable
    assert exc.details is not None and exc.details["path"] == path


@pytest.mark.parametrize("case", list(BAD_VALUES))
async def test_a_refused_ack_fails_alone_and_its_batch_mates_commit(
    driver: PostgresDriver,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    case: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bad_value, path = BAD_VALUES[case]
    claimed = await _claim(driver, clock.now_ms())
    settler, sizes = _spied(driver, monkeypatch)
    refused: dict[str, BaseException] = {}

    async def ack(n: int, c: ClaimedJob) -> None:
        try:
            await settler.ack(c.record.id, c.token, bad_value if n == BAD else {"n": n})
        except Exception as exc:
            refused[c.record.id] = exc

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for n, c in enumerate(claimed):
                tg.start_soon(ack, n, c)
    assert sizes == [COUNT]  # every ack was in the one statement that was refused
    bad_id = claimed[BAD].record.id
    assert list(refused) == [bad_id]
    _assert_refused(refused[bad_id], path)
    found = await sql.fetch("SELECT id, state, output FROM mcp_jobs.jobs")
    states = {row["id"]: (row["state"], row["output"]) for row in found}
    assert states.pop(bad_id) == ("running", None)
    good = {c.record.id: ("done", f'{{"n": {n}}}') for n, c in enumerate(claimed) if n != BAD}
    assert states == good


@pytest.mark.parametrize("case", list(BAD_VALUES))
async def test_a_refused_step_write_fails_alone_and_its_batch_mates_commit(
    driver: PostgresDriver, clock: ManualClock, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad_value, path = BAD_VALUES[case]
    claimed = await _claim(driver, clock.now_ms())
    settler, sizes = _spied(driver, monkeypatch)
    now = clock.now_ms()
    refused: dict[str, BaseException] = {}

    async def write(n: int, c: ClaimedJob) -> None:
        step = StepRecord(
            job_id=c.record.id,
            run_id=c.record.run_id,
            name="fetch",
            status="completed",
            output=bad_value if n == BAD else [n],
            started_at=now,
            finished_at=now,
            attempts=1,
        )
        try:
            await settler.save_step(c.record.id, c.token, step)
        except Exception as exc:
            refused[c.record.id] = exc

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for n, c in enumerate(claimed):
                tg.start_soon(write, n, c)
    assert sizes == [COUNT]
    bad = claimed[BAD]
    assert list(refused) == [bad.record.id]
    _assert_refused(refused[bad.record.id], path)
    assert await driver.load_steps(bad.record.run_id) == []
    for n, c in enumerate(claimed):
        if n != BAD:
            (step,) = await driver.load_steps(c.record.run_id)
            assert (step.name, step.output) == ("fetch", [n])
    # The refusal settled nothing else: the bad job's own ack still goes through.
    await settler.ack(bad.record.id, bad.token, None)
    assert (await driver.get(bad.record.id)).state == "done"


class Numbered(BaseModel):
    n: int


async def test_a_job_whose_ack_is_refused_fails_for_good_and_runs_once(
    pg_url: str, clock: ManualClock, registry: JobRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the engine's check (switched off here), the refused ack fails its job with
    JOB_OUTPUT_INVALID through a nack: not left running for its lease to expire and re-run it."""
    monkeypatch.setattr("engine.run_job.storable_output", lambda job, origin, value, bound: value)
    runs: Counter[int] = Counter()

    @job(idempotency_key=lambda i: str(i.n), retry=Retry(attempts=3), registry=registry)
    async def produce(input: Numbered, ctx: JobContext) -> Any:
        runs[input.n] += 1
        return float("nan") if input.n == BAD else input.n

    jobs = await connect(pg_url, clock=clock, registry=registry)
    try:
        ids = [(await jobs.enqueue(produce, {"n": n})).id for n in range(COUNT)]
        worker = Worker(jobs, concurrency=COUNT)
        with anyio.fail_after(30):
            assert await worker.run_until_idle() == COUNT
            clock.advance(3_600_000)  # past every lease and retry delay
            assert await worker.run_until_idle() == 0
        bad = await jobs.get(ids[BAD])
        assert (bad.state, bad.attempt) == ("failed", 1)
        assert bad.last_error is not None and bad.last_error.code == "JOB_OUTPUT_INVALID"
        for n, job_id in enumerate(ids):
            if n != BAD:
                record = await jobs.get(job_id)
                assert (record.state, record.output) == ("done", n)
        assert runs == Counter(range(COUNT))
    finally:
        await jobs.close()


@pytest.mark.parametrize("converted", [True, False], ids=["as-invalid-argument", "as-unavailable"])
async def test_a_refused_statement_is_split_until_each_refused_item_stands_alone(
    converted: bool,
) -> None:
    statements: list[list[int]] = []
    refusal = asyncpg.exceptions.UntranslatableCharacterError("unsupported Unicode escape")
    # However the driver converts the server's refusal, the split finds it behind the error.
    raised = (
        InvalidArgumentError("value", "…", "a value PostgreSQL accepts")
        if converted
        else DriverUnavailableError("postgres", "the server refused the operation")
    )

    async def flush(batch: Sequence[int]) -> list[JobsError | None]:
        statements.append(list(batch))
        if any(value in (2, 5) for value in batch):
            raise raised from refusal
        return [None] * len(batch)

    batch = list(range(8))
    outcomes = await flush_apart(batch, flush, data_error, lambda v, found: JobSlotLostError("x"))
    assert len(outcomes) == 8
    assert [v for v, outcome in zip(batch, outcomes, strict=True) if outcome is not None] == [2, 5]
    # Halves, not one statement per item: a refused half is split again, a clean one commits.
    assert statements[0] == list(range(8)) and len(statements) == 11


@pytest.mark.parametrize(
    "failure",
    [
        ConnectionResetError("connection reset"),
        asyncpg.exceptions.AdminShutdownError("terminating connection"),
        asyncpg.exceptions.SerializationError("could not serialize access"),
    ],
    ids=["connection-reset", "admin-shutdown", "serialization"],
)
async def test_a_failure_that_is_not_the_data_is_not_split_and_settles_no_item(
    failure: Exception,
) -> None:
    """An outage or a conflict says nothing about one item: it reaches the group commit whole
    (which hands it to every caller), and no item is marked refused."""
    statements: list[int] = []

    async def flush(batch: Sequence[int]) -> list[JobsError | None]:
        statements.append(len(batch))
        raise DriverUnavailableError("postgres", "down") from failure

    with pytest.raises(DriverUnavailableError):
        await flush_apart(list(range(4)), flush, data_error, lambda v, found: JobSlotLostError("x"))
    assert statements == [4]
