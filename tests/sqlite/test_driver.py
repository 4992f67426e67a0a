"""What only the SQLite driver has: the default file, pragmas, locks, wake-ups, the app's own
transaction for the outbox, and group commit."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, connect, job
from engine.driver_errors import DatabaseUrlInvalidError
from engine.drivers import DATABASE_URL_ENV
from engine.drivers.base import AckWrite
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite.errors import PathRefused
from engine.drivers.sqlite.library import sqlite3
from engine.errors import JobsError
from engine.testing.blocked import wait_all_tasks_blocked
from schemas.jobs import JobFilter
from tests.sqlite.enqueues import request
from tests.sqlite.opening import migrate_refused


class Item(BaseModel):
    n: int


@pytest.fixture
async def driver(tmp_path: Path, clock: ManualClock) -> AsyncIterator[SqliteDriver]:
    d = SqliteDriver(str(tmp_path / "jobs.db"), clock=clock)
    await d.migrate()
    yield d
    await d.close()


async def test_default_url_is_a_file_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: ManualClock, registry: JobRegistry
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)

    @job(idempotency_key=lambda i: f"item:{i.n}", registry=registry)
    async def item(input: Item, ctx: JobContext) -> None:
        return None

    first = await connect(clock=clock, registry=registry)
    r = await first.enqueue(item, {"n": 1})
    await first.close()
    assert (tmp_path / ".mcp-jobs" / "jobs.db").is_file()
    second = await connect(clock=clock, registry=registry)
    try:
        assert first.driver.kind == second.driver.kind == "sqlite"
        assert (await second.get(r.id)).input == {"n": 1}
        assert (await second.enqueue(item, {"n": 1})).deduped
    finally:
        await second.close()


async def test_parent_directories_are_created(tmp_path: Path, clock: ManualClock) -> None:
    d = SqliteDriver(str(tmp_path / "a" / "b" / "jobs.db"), clock=clock)
    await d.migrate()
    await d.close()
    assert (tmp_path / "a" / "b" / "jobs.db").is_file()


async def test_connection_runs_in_wal_with_foreign_keys_and_a_busy_timeout(
    tmp_path: Path, clock: ManualClock
) -> None:
    d = SqliteDriver(str(tmp_path / "jobs.db"), clock=clock, busy_timeout_ms=1234)
    await d.migrate()
    try:
        pragmas = await d._exec.run(
            lambda c: [
                c.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "foreign_keys", "busy_timeout", "synchronous")
            ],
            write=False,
        )
    finally:
        await d.close()
    assert pragmas == ["wal", 1, 1234, 1]  # synchronous 1 = NORMAL


async def test_invalid_options_are_refused(tmp_path: Path, clock: ManualClock) -> None:
    path = str(tmp_path / "jobs.db")
    for options in ({"poll_ms": 0}, {"synchronous": "SOMETIMES"}, {"busy_timeout_ms": -1}):
        with pytest.raises(JobsError) as raised:
            SqliteDriver(path, clock=clock, **options)
        assert raised.value.code == "INVALID_ARGUMENT"


async def test_sqlite_errors_become_driver_unavailable_with_the_cause_chained(
    tmp_path: Path, driver: SqliteDriver
) -> None:
    raw = sqlite3.connect(tmp_path / "jobs.db")
    raw.execute("DROP TABLE mcp_jobs_workers")
    raw.close()
    with pytest.raises(JobsError) as raised:
        await driver.live_workers(0)
    assert raised.value.code == "DRIVER_UNAVAILABLE"
    assert raised.value.retryable
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
    assert raised.value.fix == f"mcp-jobs db migrate --database-url sqlite:///{driver.path}"
    # The error undid only its own op: the connection carries on.
    assert (await driver.enqueue([request(1)]))[0].deduped is False


async def _shown(fix: str) -> str:
    with anyio.fail_after(30):
        done = await anyio.run_process(fix, check=False)
    assert done.returncode == 0, (fix, done.stderr)
    return done.stdout.decode()


async def test_a_url_naming_a_directory_is_refused_not_waited_on(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Before, DRIVER_UNAVAILABLE: an agent retried it and a starting worker waited for ever."""
    (tmp_path / "taken").mkdir()
    error = await migrate_refused(tmp_path / "taken", clock)
    assert (error.code, error.retryable) == ("DATABASE_URL_INVALID", False)
    assert isinstance(error, DatabaseUrlInvalidError) and error.answered  # serve keeps serving
    assert f"{tmp_path / 'taken'} is a directory" in error.cause
    assert isinstance(error.__cause__, PathRefused)  # refused before SQLite opens it
    assert (await _shown(error.fix)).startswith("d")  # ls -ld of the directory


@pytest.mark.parametrize("under", ["jobs.db", "deeper/jobs.db"])
async def test_a_file_where_the_path_needs_a_directory_is_refused_and_named(
    tmp_path: Path, clock: ManualClock, under: str
) -> None:
    blocker = tmp_path / "it's a file"
    blocker.write_text("not a directory")
    error = await migrate_refused(blocker / under, clock)
    assert (error.code, error.retryable) == ("DATABASE_URL_INVALID", False)
    assert isinstance(error, DatabaseUrlInvalidError) and error.answered
    assert f"{blocker} is a file, not a directory" in error.cause
    assert blocker.read_text() == "not a directory"  # nothing stored was touched
    shown = await _shown(error.fix)
    assert shown.startswith("-") and shown.rstrip().endswith(str(blocker))


def _journals(path: Path) -> list[str]:
    """The files SQLite writes beside a database that stand beside `path`."""
    return [end for end in ("journal", "wal", "shm") if os.path.lexists(f"{path}-{end}")]


@pytest.mark.parametrize("kind", ["fifo", "device"])
async def test_a_path_that_is_no_regular_file_is_refused_before_sqlite_opens_it(
    tmp_path: Path, clock: ManualClock, kind: str
) -> None:
    """/dev/null was DRIVER_UNAVAILABLE (retryable, `df -h /dev`), /dev/full STORAGE_FULL,
    and SQLite wrote a journal beside each."""
    path = tmp_path / "fifo" if kind == "fifo" else Path("/dev/null")
    if kind == "fifo":
        os.mkfifo(path)
    error = await migrate_refused(path, clock)
    assert (error.code, error.retryable) == ("DATABASE_URL_INVALID", False)
    assert f"{path} is not a regular file" in error.cause
    assert _journals(path) == []
    assert (await _shown(error.fix)).startswith("p" if kind == "fifo" else "c")  # ls -ld


async def test_a_file_sqlite_cannot_open_for_another_reason_stays_unavailable(
    clock: ManualClock,
) -> None:
    error = await migrate_refused(Path("/proc/mcp-jobs-test.db"), clock)  # no file is made there
    assert (error.code, error.retryable) == ("DRIVER_UNAVAILABLE", True)
    # Only what exists is listed, so the line succeeds (was `ls -ld /proc /proc/…`: exit 2).
    assert error.fix == "ls -ld /proc"
    assert (await _shown(error.fix)).startswith("d")


async def test_a_write_lock_held_by_another_connection_is_waited_out(
    tmp_path: Path, clock: ManualClock
) -> None:
    # busy_timeout 0: SQLite itself does not wait, so only the driver's retry can succeed.
    d = SqliteDriver(str(tmp_path / "jobs.db"), clock=clock, busy_timeout_ms=0)
    await d.migrate()
    holder = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    begins: list[str] = []

    def traced(statement: str) -> None:
        if statement == "BEGIN IMMEDIATE":
            begins.append(statement)
            if len(begins) == 2:  # the first attempt met the lock; let the retry through
                holder.execute("COMMIT")

    await d._exec.run(lambda c: c.set_trace_callback(traced), write=False)
    try:
        with anyio.fail_after(10):
            # Two jobs: a lone one would try on the event loop first (test_fast_paths.py).
            results = await d.enqueue([request(1), request(2)])
    finally:
        holder.close()
        await d.close()
    assert not any(result.deduped for result in results)
    assert len(begins) == 2


async def test_a_lock_this_process_never_releases_is_said_to_be_its_own(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Held by another connection of this very process (the app's own BEGIN IMMEDIATE), no wait
    can end it: SQLITE_WRITE_LOCK_HELD, not retryable. A holder in another process is waited
    out, then DRIVER_UNAVAILABLE (tests/sqlite/test_write_lock_held_here.py)."""
    d = SqliteDriver(str(tmp_path / "jobs.db"), clock=clock, busy_timeout_ms=0)
    await d.migrate()
    holder = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(JobsError) as raised:
            await d.enqueue([request(1)])
        assert raised.value.code == "SQLITE_WRITE_LOCK_HELD"
        assert not raised.value.retryable
        holder.execute("COMMIT")
        (result,) = await d.enqueue([request(1)])
        assert not result.deduped
    finally:
        holder.close()
        await d.close()


async def test_a_closed_drivers_connection_refuses_its_own_background_work(
    driver: SqliteDriver,
) -> None:
    # The driver's calls refuse at their door (engine/testing/kit/test_closed.py); what runs
    # behind them (a checkpoint, a version poll) meets the same refusal at the connection.
    await driver.close()
    with pytest.raises(JobsError) as raised:
        await driver._exec.run(lambda c: c.execute("SELECT 1").fetchone(), write=False)
    assert (raised.value.code, raised.value.retryable) == ("DRIVER_CLOSED", False)


async def test_concurrent_calls_share_commits_and_keep_their_own_outcomes(
    driver: SqliteDriver,
) -> None:
    await driver.enqueue([request(0, key="taken")])
    begins: list[str] = []
    await driver._exec.run(
        lambda c: c.set_trace_callback(
            lambda s: begins.append(s) if s.startswith("BEGIN") else None
        ),
        write=False,
    )
    outcomes: dict[int, str] = {}

    async def one(n: int) -> None:
        try:
            if n % 3 == 0:
                await driver.enqueue([request(n, key="taken", on_conflict="error")])
            elif n % 3 == 1:
                (lost,) = await driver.ack_many([AckWrite(f"job{n:05d}", "no-token", None)])
                if lost is not None:
                    raise lost
            else:
                await driver.enqueue([request(n)])
            outcomes[n] = "ok"
        except JobsError as exc:
            outcomes[n] = exc.code

    async with anyio.create_task_group() as tg:
        for n in range(1, 301):
            tg.start_soon(one, n)
    expected = {n: ("JOB_DUPLICATE", "JOB_SLOT_LOST", "ok")[n % 3] for n in range(1, 301)}
    assert outcomes == expected
    listed = await driver.list_jobs(JobFilter(limit=1000))
    assert len(listed.jobs) == 1 + 100
    # 300 calls, a handful of transactions: each call still returned after its own commit.
    assert len(begins) < 30, len(begins)


async def test_an_enqueue_wakes_a_waiter_on_another_driver_of_the_same_file(
    tmp_path: Path, clock: ManualClock
) -> None:
    (tmp_path / "sub").mkdir()
    waiter = SqliteDriver(str(tmp_path / "jobs.db"), clock=clock, poll_ms=3_600_000)
    other = SqliteDriver(str(tmp_path / "sub" / ".." / "jobs.db"), clock=clock)
    await waiter.migrate()
    woke = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                await waiter.wait_for_work(3_600_000)
                woke.set()

            tg.start_soon(wait)
            await wait_all_tasks_blocked()
            assert not woke.is_set()
            await other.enqueue([request(1)])
            with anyio.fail_after(5):  # the clock never moves and the poll is an hour away
                await woke.wait()
    finally:
        await waiter.close()
        await other.close()


async def test_a_commit_from_another_process_wakes_a_waiter_by_polling(
    tmp_path: Path, clock: ManualClock
) -> None:
    waiter = SqliteDriver(str(tmp_path / "jobs.db"), clock=clock, poll_ms=10)
    await waiter.migrate()
    try:
        assert await waiter.claim("w", 1, 1_000) == []
        # A plain connection stands in for another process: it has no way to notify us.
        raw = sqlite3.connect(tmp_path / "jobs.db")
        with raw:
            raw.execute(
                "INSERT INTO mcp_jobs_scheduler_state (task, last_fired_at, updated_at) "
                "VALUES ('t', 1, 1)"
            )
        raw.close()
        with anyio.fail_after(5):  # the manual clock never moves: only the poll can end it
            await waiter.wait_for_work(3_600_000)
    finally:
        await waiter.close()


async def test_wait_for_work_times_out_on_the_injected_clock(
    driver: SqliteDriver, clock: ManualClock
) -> None:
    # The default 50 ms poll for other processes' commits runs throughout, and finds none: the
    # injected clock alone ends the wait. (With anyio's own wait_all_tasks_blocked, whose looks
    # are 100 ms of real time apart, the poll woke in step with them and the test hung.)
    woke = anyio.Event()
    async with anyio.create_task_group() as tg:

        async def wait() -> None:
            await driver.wait_for_work(1_000)
            woke.set()

        tg.start_soon(wait)
        await wait_all_tasks_blocked()
        clock.advance(999)
        await wait_all_tasks_blocked()
        assert not woke.is_set()
        clock.advance(1)
        with anyio.fail_after(5):
            await woke.wait()


async def test_outbox_stages_through_the_apps_own_transaction(
    tmp_path: Path, driver: SqliteDriver
) -> None:
    app = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None)
    try:
        with pytest.raises(JobsError) as raised:
            await driver.outbox_stage(app, [request(1)])
        assert raised.value.code == "OUTBOX_NO_TX"
        with pytest.raises(JobsError) as raised:
            await driver.outbox_stage(object(), [request(1)])
        assert raised.value.code == "INVALID_ARGUMENT"  # not a connection: the wrong kind

        app.execute("BEGIN")
        await driver.outbox_stage(app, [request(1)])
        app.execute("ROLLBACK")
        assert await driver.outbox_claim("relay", "t", 10, 1_000) == []

        app.execute("BEGIN")
        app.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        app.execute("INSERT INTO orders (id) VALUES (1)")
        (staged,) = await driver.outbox_stage(app, [request(2)])
        app.execute("COMMIT")
    finally:
        app.close()
    (row,) = await driver.outbox_claim("relay", "t", 10, 1_000)
    assert row.id == staged and row.request.id == "job00002"

    elsewhere = sqlite3.connect(tmp_path / "other.db", isolation_level=None)
    try:
        elsewhere.execute("BEGIN")
        with pytest.raises(JobsError) as raised:
            await driver.outbox_stage(elsewhere, [request(3)])
        assert raised.value.code == "OUTBOX_WRONG_DATABASE"
    finally:
        elsewhere.close()


async def test_cancelled_callers_neither_strand_others_nor_write_later(
    tmp_path: Path, driver: SqliteDriver
) -> None:
    # The holder's lock parks the first call's batch inside the thread (SQLite's busy wait), so
    # the next two calls queue behind it; then the first and second callers are cancelled.
    holder = sqlite3.connect(tmp_path / "jobs.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    finished: list[int] = []

    async def call(n: int, scope: anyio.CancelScope) -> None:
        with scope:
            await driver.enqueue([request(n)])
            finished.append(n)

    scopes = {n: anyio.CancelScope() for n in (1, 2, 3)}
    try:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, 1, scopes[1])
                await wait_all_tasks_blocked()  # 1 is in the thread, waiting on the lock
                tg.start_soon(call, 2, scopes[2])
                tg.start_soon(call, 3, scopes[3])
                await wait_all_tasks_blocked()  # 2 and 3 are queued
                scopes[1].cancel()
                scopes[2].cancel()
                await wait_all_tasks_blocked()
                holder.execute("COMMIT")
    finally:
        holder.close()
    assert finished == [3]
    listed = await driver.list_jobs(JobFilter(limit=10))
    # 1 was already in the thread when cancelled, so it committed; 2 never reached one.
    assert sorted(j.id for j in listed.jobs) == ["job00001", "job00003"]
