"""A full disk is STORAGE_FULL, with `df -h` on the database's directory, and stores nothing.

The disk is filled for real as SQLite sees it: `PRAGMA max_page_count` caps the file at its
current size, and SQLite then refuses to grow it with SQLITE_FULL, the very code a full disk
gives. No root, no mount, nothing to clean up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, connect, job
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite.connection import Executor, Op
from engine.drivers.sqlite.library import sqlite3
from engine.errors import JobsError
from engine.testing.blocked import wait_all_tasks_blocked

BIG = "x" * 100_000  # far more than the free space left in any page


class Item(BaseModel):
    n: int
    blob: str = ""


@pytest.fixture
async def jobs(tmp_path: Path, clock: ManualClock, registry: JobRegistry) -> AsyncIterator[Jobs]:
    client = await connect(f"sqlite:///{tmp_path}/jobs.db", clock=clock, registry=registry)
    try:
        yield client
    finally:
        await client.close()


async def cap_file(jobs: Jobs, *, pages: int | None = None) -> None:
    """Let the file grow to `pages` pages at most (its current size when None)."""

    def cap(conn: sqlite3.Connection) -> None:
        limit = pages or conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {int(limit)}")

    await cast(SqliteDriver, jobs.driver)._exec.run(cap)


async def test_a_full_disk_is_storage_full_and_the_refused_enqueue_stores_nothing(
    jobs: Jobs, registry: JobRegistry, tmp_path: Path
) -> None:
    @job(idempotency_key=lambda i: f"item:{i.n}", registry=registry)
    async def item(input: Item, ctx: JobContext) -> None:
        return None

    kept = await jobs.enqueue(item, {"n": 1})
    await cap_file(jobs)

    with pytest.raises(JobsError) as raised:
        await jobs.enqueue(item, {"n": 2, "blob": BIG})

    error = raised.value
    assert error.code == "STORAGE_FULL" and error.retryable
    assert error.fix == f"df -h {tmp_path}"
    assert isinstance(error.__cause__, sqlite3.OperationalError)
    assert [j.id for j in (await jobs.list(limit=10)).jobs] == [kept.id]
    # Room again (an operator freed space): the same connection takes the same write.
    await cap_file(jobs, pages=1_000_000)
    await jobs.enqueue(item, {"n": 2, "blob": BIG})
    assert len((await jobs.list(limit=10)).jobs) == 2


async def test_a_full_disk_that_undoes_the_whole_transaction_fails_every_op_in_it(
    tmp_path: Path,
) -> None:
    """Group commit: an op that fits and then one that does not, in one batch. SQLite rolls the
    whole transaction back on SQLITE_FULL, so the first op must not report success either."""
    executor = Executor(str(tmp_path / "t.db"))
    try:

        def setup(conn: sqlite3.Connection) -> None:
            conn.execute("CREATE TABLE t (v TEXT)")

        await executor.run(setup)

        def insert(value: str) -> Op[Any]:
            return Op(lambda conn: conn.execute("INSERT INTO t VALUES (?)", (value,)), True)

        def cap(conn: sqlite3.Connection) -> None:
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages}")

        await executor.run(cap)
        small, big = insert("fits"), insert(BIG)
        executor._run_batch([small, big])

        assert [op.error.code for op in (small, big) if isinstance(op.error, JobsError)] == [
            "STORAGE_FULL",
            "STORAGE_FULL",
        ]

        def count(conn: sqlite3.Connection) -> int:
            found: int = conn.execute("SELECT count(*) FROM t").fetchone()[0]
            return found

        assert await executor.run(count, write=False) == 0
    finally:
        await executor.close()


async def test_a_worker_whose_ack_finds_the_disk_full_settles_once_there_is_room(
    jobs: Jobs, registry: JobRegistry, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The run's outcome is kept and written again: it was left `running`, to run a second time
    once its lease ran out."""
    ran: list[int] = []

    @job(idempotency_key=lambda i: f"item:{i.n}", registry=registry)
    async def report(input: Item, ctx: JobContext) -> str:
        ran.append(input.n)
        await cap_file(jobs)  # the disk fills while the body runs: its output has no room
        return BIG

    done = await jobs.enqueue(report, {"n": 1})
    worker = Worker(jobs, concurrency=1, scheduler=False, outbox_relay=False, prune=False)
    with anyio.fail_after(10), caplog.at_level(logging.WARNING, logger="mcp_jobs.worker"):
        run = asyncio.create_task(worker.run())
        while "is not written yet" not in caplog.text:
            await wait_all_tasks_blocked()
        assert "STORAGE_FULL" in caplog.text
        await cap_file(jobs, pages=1_000_000)  # an operator frees space
        while (await jobs.get(done.id)).state != "done":
            clock.advance(1_000)
            await wait_all_tasks_blocked()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    record = await jobs.get(done.id)
    assert (record.attempt, record.output, ran) == (1, BIG, [1])
