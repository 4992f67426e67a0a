"""The SQLite driver's short cuts keep their promises: a lone enqueue skips the thread hop but
never waits on another process's lock on the event loop, a lone op is undone without a
savepoint, and the look for other processes' commits is fast after work and backs off to
`poll_ms` when idle."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio

from engine import ManualClock
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite.connection import Executor, Op
from engine.drivers.sqlite.driver import BUSY_HOLD_S, FAST_POLL_MS
from engine.drivers.sqlite.library import sqlite3
from tests.sqlite.enqueues import START, request


async def _trace(driver: SqliteDriver) -> list[tuple[str, int]]:
    """Every statement the connection runs from now on, with the thread that ran it."""
    seen: list[tuple[str, int]] = []
    await driver._exec.run(
        lambda c: c.set_trace_callback(lambda s: seen.append((s, threading.get_ident()))),
        write=False,
    )
    seen.clear()
    return seen


async def test_a_lone_enqueue_runs_on_the_calling_thread(driver: SqliteDriver) -> None:
    seen = await _trace(driver)
    (result,) = await driver.enqueue([request(1)])
    assert not result.deduped
    begins = [thread for statement, thread in seen if statement == "BEGIN IMMEDIATE"]
    assert begins == [threading.get_ident()]


async def test_lone_enqueues_set_the_busy_timeout_once_and_the_thread_gets_its_own_back(
    tmp_path: Path,
) -> None:
    d = SqliteDriver(str(tmp_path / "jobs.db"), clock=ManualClock(START), busy_timeout_ms=4321)
    await d.migrate()
    try:
        seen = await _trace(d)
        for n in range(3):
            await d.enqueue([request(n)])
        pragmas = [s for s, _ in seen if s.startswith("PRAGMA busy_timeout")]
        assert pragmas == ["PRAGMA busy_timeout = 0"]
        # The thread's next batch waits for locks again, as configured.
        waits = await d._exec.run(
            lambda c: c.execute("PRAGMA busy_timeout").fetchone()[0], write=False
        )
        assert waits == 4321
    finally:
        await d.close()


async def test_a_lone_write_is_undone_without_a_savepoint_and_a_batched_one_with_one(
    tmp_path: Path,
) -> None:
    executor = Executor(str(tmp_path / "t.db"))
    seen: list[str] = []

    def insert(value: str, *, refuse: bool = False) -> Op[None]:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO t VALUES (?)", (value,))
            if refuse:
                raise ValueError(f"refused after writing {value}")

        return Op(write, True)

    def rows(conn: sqlite3.Connection) -> list[str]:
        return [v for (v,) in conn.execute("SELECT v FROM t ORDER BY v")]

    try:
        await executor.run(lambda c: c.execute("CREATE TABLE t (v TEXT)"))
        await executor.run(lambda c: c.set_trace_callback(seen.append), write=False)
        seen.clear()
        lone = insert("a", refuse=True)
        executor._run_batch([lone])
        assert isinstance(lone.error, ValueError)
        assert "SAVEPOINT op" not in seen and "COMMIT" not in seen
        assert await executor.run(rows, write=False) == []

        seen.clear()
        kept, refused = insert("b"), insert("c", refuse=True)
        executor._run_batch([kept, refused])
        assert kept.error is None and isinstance(refused.error, ValueError)
        assert seen.count("SAVEPOINT op") == 2 and "ROLLBACK TO op" in seen
        assert await executor.run(rows, write=False) == ["b"]
    finally:
        await executor.close()


async def test_concurrent_lone_enqueues_still_share_one_commit(driver: SqliteDriver) -> None:
    seen = await _trace(driver)
    results: list[bool] = []

    async def one(n: int) -> None:
        (result,) = await driver.enqueue([request(n)])
        results.append(result.deduped)

    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(one, n)
    assert results == [False] * 8
    assert [s for s, _ in seen].count("BEGIN IMMEDIATE") == 1


async def test_a_lone_enqueue_meeting_a_lock_waits_for_it_off_the_event_loop(
    tmp_path: Path,
) -> None:
    d = SqliteDriver(str(tmp_path / "jobs.db"), clock=ManualClock(START), busy_timeout_ms=60_000)
    await d.migrate()
    holder = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    loop_thread = threading.get_ident()
    seen = await _trace(d)

    def release_once_off_the_loop(statement: str) -> None:
        seen.append((statement, threading.get_ident()))
        if statement == "BEGIN IMMEDIATE" and threading.get_ident() != loop_thread:
            holder.execute("COMMIT")  # the thread's attempt may now take the lock

    await d._exec.run(lambda c: c.set_trace_callback(release_once_off_the_loop), write=False)
    try:
        with anyio.fail_after(10):
            (result,) = await d.enqueue([request(1)])
    finally:
        holder.close()
        await d.close()
    assert not result.deduped
    on_loop = [s for s, thread in seen if thread == loop_thread]
    # The try on the loop waits for nothing (busy timeout 0), then hands over to the thread.
    assert on_loop[:2] == ["PRAGMA busy_timeout = 0", "BEGIN IMMEDIATE"]
    off_loop = [s for s, thread in seen if thread != loop_thread]
    assert off_loop[off_loop.index("BEGIN IMMEDIATE") :].count("COMMIT") == 1


async def test_the_commit_look_is_fast_after_work_and_backs_off_when_idle(
    driver: SqliteDriver,
) -> None:
    assert driver._next_gap_ms() == 50  # never worked: the idle gap from the start
    await driver.enqueue([request(1)])
    assert len(await driver.claim("w", 1, 30_000)) == 1
    assert [driver._next_gap_ms() for _ in range(3)] == [FAST_POLL_MS] * 3
    driver._worked_at -= BUSY_HOLD_S  # the hold has run out
    assert [driver._next_gap_ms() for _ in range(6)] == [4, 8, 16, 32, 50, 50]
    assert await driver.claim("w", 1, 30_000) == []  # an empty claim is not work
    assert driver._next_gap_ms() == 50
