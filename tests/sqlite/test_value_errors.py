"""What SQLite refuses is typed by what went wrong: a value it cannot hold is INVALID_ARGUMENT
(terminal, nothing stored), a damaged file STORE_DAMAGED (terminal), and only a locked,
unreadable or unmigrated file is DRIVER_UNAVAILABLE, each with a command that helps."""

from __future__ import annotations

import os
import shlex
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, Jobs, ManualClock, Worker, connect, job
from engine.drivers.base import AckWrite, StepWrite
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite.library import sqlite3
from engine.errors import JobsError
from engine.testing.plugin import builtin_app_transaction
from schemas.errors import ErrorPayload
from schemas.jobs import EnqueueRequest, JobFilter, NackOptions
from schemas.steps import StepRecord
from tests.sqlite.fix_runner import run_fix
from tests.sqlite.opening import migrate_refused
from tests.support.damaged_ledgers import (
    Overwrite,
    check_a_wait_fails_on_a_damaged_event,
    check_caps_go_on,
    check_ledger_row_is_damage,
    check_outbox_passes_over,
    check_pause_details_left_out,
    check_presence_passes_over,
    check_pruner_forgets_a_damaged_descriptor,
    check_rate_limits_go_on,
    check_scheduler_goes_on,
)
from tests.support.damaged_rows import check_buried_on_claim, check_listed_in_place


class Item(BaseModel):
    n: int
    blob: str = ""


# The length-limit tests lower SQLite's limit through `Connection.setlimit` (Python 3.11);
# pysqlite3, the driver's module where Python's own SQLite is too old, has no such method.
needs_setlimit = pytest.mark.skipif(
    not hasattr(sqlite3.Connection, "setlimit"),
    reason=f"{sqlite3.__name__}.Connection has no setlimit to lower the length limit with",
)


def _item(n: int, now: int, **extra: str) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"job{n}",
        run_id=f"run{n}",
        name="item",
        queue="default",
        idempotency_key=f"k{n}",
        input={"n": n, **extra},
        run_at=now,
        max_attempts=3,
    )


@pytest.fixture
async def driver(tmp_path: Path, clock: ManualClock) -> AsyncIterator[SqliteDriver]:
    d = SqliteDriver(str(tmp_path / "jobs.db"), clock=clock)
    await d.migrate()
    yield d
    await d.close()


@pytest.fixture
async def file_jobs(
    tmp_path: Path, clock: ManualClock, registry: JobRegistry
) -> AsyncIterator[Jobs]:
    """A client of `registry` on the file another program writes into (`_another_program`)."""
    jobs = await connect(f"sqlite:///{tmp_path / 'jobs.db'}", clock=clock, registry=registry)
    yield jobs
    await jobs.close()


async def test_an_integer_past_64_bits_is_invalid_argument_and_stores_nothing(
    driver: SqliteDriver, clock: ManualClock
) -> None:
    with pytest.raises(JobsError) as raised:
        await driver.acquire_slots("job-a", [("cap", 1)], 2**64)
    assert raised.value.code == "INVALID_ARGUMENT" and not raised.value.retryable
    assert isinstance(raised.value.__cause__, OverflowError)
    # The refused write left no slot behind: another job takes the only one.
    assert await driver.acquire_slots("job-b", [("cap", 1)], clock.now_ms() + 1000) is None


async def test_a_value_the_schema_refuses_is_invalid_argument(driver: SqliteDriver) -> None:
    def no_hostname(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO mcp_jobs_workers (id) VALUES ('w')")

    with pytest.raises(JobsError) as raised:
        await driver._exec.run(no_hostname)
    assert raised.value.code == "INVALID_ARGUMENT" and not raised.value.retryable
    assert isinstance(raised.value.__cause__, sqlite3.IntegrityError)
    # The schema, printed by a line that runs as given (Python's sqlite3, not the shell).
    fix = raised.value.fix
    assert fix.startswith("python3 -c ") and shlex.quote(driver.path)[1:-1] in fix
    ran = await run_fix(fix)
    assert ran.returncode == 0 and b"CREATE TABLE mcp_jobs_workers" in ran.stdout, ran.stderr
    assert await driver.live_workers(0) == []


@needs_setlimit
async def test_a_string_past_sqlites_length_limit_is_invalid_argument_and_stores_nothing(
    tmp_path: Path, clock: ManualClock, registry: JobRegistry
) -> None:
    @job(idempotency_key=lambda i: f"item:{i.n}", registry=registry)
    async def item(input: Item, ctx: JobContext) -> None:
        return None

    jobs = await connect(f"sqlite:///{tmp_path}/jobs.db", clock=clock, registry=registry)
    try:
        d = jobs.driver
        assert isinstance(d, SqliteDriver)
        await d._exec.run(lambda c: c.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 10_000))
        with pytest.raises(JobsError) as raised:
            await jobs.enqueue(item, {"n": 1, "blob": "x" * 20_000})
        assert raised.value.code == "INVALID_ARGUMENT" and not raised.value.retryable
        assert isinstance(raised.value.__cause__, sqlite3.DataError)
        assert (await jobs.list(limit=10)).jobs == []
        await jobs.enqueue(item, {"n": 1})  # the connection carries on
    finally:
        await jobs.close()


async def test_a_file_that_is_not_a_database_is_refused_untouched_with_a_fix_that_runs(
    tmp_path: Path, clock: ManualClock
) -> None:
    """It was STORE_DAMAGED, and its fix (the integrity check) ended in a traceback: the URL
    names another program's file, which no restore mends."""
    path = tmp_path / "jobs.db"
    path.write_bytes(b"this is not a database file, whatever its name says" * 100)
    error = await migrate_refused(path, clock)
    # Terminal: waiting does not make the file a database.
    assert (error.code, error.retryable) == ("DATABASE_URL_INVALID", False)
    assert f"{path} is not an SQLite database" in error.cause
    with anyio.fail_after(30):
        ran = await anyio.run_process(error.fix, check=False)
    assert ran.returncode == 0 and ran.stdout.startswith(b"-"), ran  # ls -ld: a regular file
    assert path.read_bytes().startswith(b"this is not a database file")  # never written
    assert os.listdir(tmp_path) == ["jobs.db"]


async def _migrated(path: Path, clock: ManualClock) -> Path:
    """A sound database file at `path`: the last close checkpoints, so its pages are in it."""
    sound = SqliteDriver(str(path), clock=clock)
    await sound.migrate()
    await sound.close()
    return path


async def test_a_database_whose_header_is_damaged_is_damaged_and_its_fix_runs(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = await _migrated(tmp_path / "jobs.db", clock)
    data = bytearray(path.read_bytes())
    data[16:18] = (3).to_bytes(2, "big")  # a page size no SQLite writes; the magic is intact
    path.write_bytes(bytes(data))
    error = await migrate_refused(path, clock)
    assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
    assert "SQLITE_NOTADB" in error.cause and "restore it from a backup" in error.cause
    ran = await run_fix(error.fix)
    # It says the file cannot be read as a database, without a traceback.
    assert b"Traceback" not in ran.stderr and b"file is not a database" in ran.stderr, ran
    assert path.read_bytes() == bytes(data)  # read-only


async def test_a_file_with_damaged_pages_is_damaged_and_its_fix_names_them(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = await _migrated(tmp_path / "jobs.db", clock)
    schema_pages = path.stat().st_size  # the jobs' rows go on pages after these
    sound = SqliteDriver(str(path), clock=clock)
    try:
        await sound.enqueue([_item(n, clock.now_ms(), pad="x" * 500) for n in range(200)])
    finally:
        await sound.close()
    # Bit rot: the cell pointers of every other page written after the schema.
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for start in range(schema_pages, len(data) - page, 2 * page):
        data[start + 8 : start + 40] = b"\xff" * 32
    path.write_bytes(bytes(data))

    d = SqliteDriver(str(path), clock=clock)
    try:
        with pytest.raises(JobsError) as raised:
            await d.list_jobs(JobFilter(limit=500))
    finally:
        await d.close()
    assert (raised.value.code, raised.value.retryable) == ("STORE_DAMAGED", False)
    assert (
        "SQLITE_CORRUPT" in raised.value.cause and "restore it from a backup" in raised.value.cause
    )
    ran = await run_fix(raised.value.fix)
    # The check runs and names the damaged pages, where a sound file prints "ok".
    assert ran.returncode == 0 and b"On tree page" in ran.stdout, ran


async def test_a_row_another_program_wrote_is_damage_named_in_lists_and_buried_on_claim(
    driver: SqliteDriver, tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A job's JSON column that is not JSON: reading that job is STORE_DAMAGED (not retried),
    with a fix that prints the row's columns as stored; a list names it in its place and pages
    on; a claim that takes it settles it dead and hands out the jobs beside it (a worker would
    stop claiming at all, and a row left running would come back at every lease's end)."""
    await driver.enqueue([_item(n, clock.now_ms()) for n in (1, 2, 3)])
    _another_program(tmp_path, "UPDATE mcp_jobs_jobs SET input = 'not json' WHERE id = 'job2'")

    with pytest.raises(JobsError) as raised:
        await driver.get("job2")
    error = raised.value
    assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
    assert "job job2: JSONDecodeError" in error.cause
    ran = await run_fix(error.fix)
    assert ran.returncode == 0 and b"input: 'not json'" in ran.stdout, ran
    assert await check_listed_in_place(driver, "job3", "job2", "job1") == error.fix

    await check_buried_on_claim(driver, "job2", ["job1", "job3"])
    assert "claimed a job that cannot be read; it is dead now (STORE_DAMAGED)" in caplog.text
    ran = await run_fix(error.fix)  # the row as stored: its input, and the damage as its error
    assert b"input: 'not json'" in ran.stdout and b"STORE_DAMAGED" in ran.stdout, ran
    (event,) = _another_program(
        tmp_path, "SELECT kind, data FROM mcp_jobs_events WHERE job_id = 'job2'"
    )
    assert event[0] == "dead" and "STORE_DAMAGED" in event[1], event


@pytest.mark.parametrize(
    ("edit", "shown"), [("max_attempts = 0", b"max_attempts: 0"), ("attempt = -5", b"attempt: -")]
)
async def test_counts_no_job_can_have_are_damage_and_buried_on_claim(
    driver: SqliteDriver, tmp_path: Path, clock: ManualClock, edit: str, shown: bytes
) -> None:
    """A count edited to one no job can have: it ran with attempt -4, or went dead as if its
    lease had expired on each of its 0 attempts. Now the row is damage naming the column."""
    await driver.enqueue([_item(n, clock.now_ms()) for n in (1, 2, 3)])
    _another_program(tmp_path, f"UPDATE mcp_jobs_jobs SET {edit} WHERE id = 'job2'")
    with pytest.raises(JobsError) as raised:
        await driver.get("job2")
    error = raised.value
    assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
    assert edit.split()[0] + ": Input should be greater than or equal to" in error.cause
    await check_buried_on_claim(driver, "job2", ["job1", "job3"])
    ran = await run_fix(error.fix)
    assert ran.returncode == 0 and shown in ran.stdout and b"STORE_DAMAGED" in ran.stdout, ran


@pytest.mark.parametrize(
    ("lowered", "cause"),
    [
        (
            None,
            "the lease of job job1 expired on each of its 3 attempts: the worker running it died,"
            " or its event loop was blocked",
        ),
        (
            1,
            "job job1 was claimed for attempt 4, past the 1 its row allows (max_attempts was",
        ),
    ],
)
async def test_a_job_past_its_attempts_goes_dead_saying_why(
    tmp_path: Path, clock: ManualClock, lowered: int | None, cause: str
) -> None:
    """A job whose lease expired on each of its attempts goes dead at the next claim, its body
    not run; one whose max_attempts someone lowered below the runs it had does too, and says
    that, not that its lease expired on each of its (fewer) attempts."""
    registry = JobRegistry()
    ran: list[int] = []

    @job(name="item", idempotency_key=lambda i: str(i.n), registry=registry)
    async def item(input: Item, ctx: JobContext) -> None:
        ran.append(input.n)

    driver = SqliteDriver(str(tmp_path / "jobs.db"), clock=clock)
    await driver.migrate()
    jobs = Jobs(driver, registry=registry, clock=clock)
    try:
        await driver.enqueue([_item(1, clock.now_ms())])
        for _ in range(3):  # three workers that died holding it
            (claimed,) = await driver.claim("gone", 1, 1_000)
            clock.advance(1_000)
        assert claimed.record.attempt == 3
        if lowered is not None:
            _another_program(tmp_path, f"UPDATE mcp_jobs_jobs SET max_attempts = {lowered}")
        assert await Worker(jobs, concurrency=1).run_until_idle() == 1
        dead = await jobs.get("job1")
        assert dead.state == "dead" and ran == []
        assert dead.last_error is not None and dead.last_error.cause.startswith(cause), dead
    finally:
        await driver.close()


@pytest.mark.parametrize("value", ["'soon'", "X'01'"])
async def test_a_run_at_another_program_wrote_is_due_and_buried_on_claim(
    driver: SqliteDriver, tmp_path: Path, clock: ManualClock, value: str
) -> None:
    """Text (or a blob) sorts after every number, so the row was never due: it sat `ready` for
    ever, counted in the queue's depth and age, and no worker said why."""
    await driver.enqueue([_item(n, clock.now_ms()) for n in (1, 2, 3)])
    _another_program(tmp_path, f"UPDATE mcp_jobs_jobs SET run_at = {value} WHERE id = 'job2'")
    await check_buried_on_claim(driver, "job2", ["job1", "job3"])


async def test_a_lease_another_program_wrote_is_over_and_the_job_is_taken_over(
    driver: SqliteDriver, tmp_path: Path, clock: ManualClock
) -> None:
    """A running job whose lease expiry is text held it for ever: its worker gone, no claim
    took it over. Now it counts as an expired lease and the next claim takes it, writing a
    lease of its own."""
    await driver.enqueue([_item(n, clock.now_ms()) for n in (1, 2)])
    assert len(await driver.claim("w1", 10, 60_000)) == 2
    _another_program(tmp_path, "UPDATE mcp_jobs_jobs SET lease_expires_at = 'x' WHERE id = 'job2'")
    (stats,) = await driver.stats(None)
    assert (stats.running, stats.expired_leases) == (2, 1), stats

    (taken,) = await driver.claim("w2", 10, 60_000)
    assert (taken.record.id, taken.record.attempt, taken.record.worker_id) == ("job2", 2, "w2")
    assert taken.record.lease_expires_at == clock.now_ms() + 60_000
    assert (await driver.get("job2")).lease_expires_at == clock.now_ms() + 60_000
    assert await driver.claim("w3", 10, 60_000) == []


@needs_setlimit
async def test_one_refused_item_fails_alone_in_a_set_wise_settle(
    driver: SqliteDriver, clock: ManualClock
) -> None:
    now = clock.now_ms()
    await driver.enqueue([_item(n, now) for n in range(3)])
    held = {c.record.id: c.token for c in await driver.claim("w1", 3, 30_000)}
    await driver._exec.run(lambda c: c.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 10_000))

    def step(job_id: str, output: object) -> StepWrite:
        record = StepRecord(
            job_id=job_id,
            run_id=job_id.replace("job", "run"),
            name="s",
            status="completed",
            output=output,
            started_at=now,
            attempts=1,
        )
        return StepWrite(job_id, held[job_id], record)

    steps = [
        step("job0", 1),
        step("job1", "x" * 20_000),
        StepWrite("job2", "stale", step("job2", 2).step),
    ]
    saved = await driver.save_steps_many(steps)
    assert [None if o is None else o.code for o in saved] == [
        None,
        "INVALID_ARGUMENT",
        "JOB_SLOT_LOST",
    ]
    assert [s.name for s in await driver.load_steps("run0")] == ["s"]
    assert await driver.load_steps("run1") == []

    acks = [
        AckWrite("job0", held["job0"], {"ok": True}),
        AckWrite("job1", held["job1"], "x" * 20_000),
        AckWrite("job2", "stale", None),
    ]
    acked = await driver.ack_many(acks)
    assert [None if o is None else o.code for o in acked] == [
        None,
        "INVALID_ARGUMENT",
        "JOB_SLOT_LOST",
    ]
    assert [(await driver.get(f"job{n}")).state for n in range(3)] == ["done", "running", "running"]


async def test_an_event_another_program_wrote_is_damage_named_with_its_job(
    driver: SqliteDriver, tmp_path: Path, clock: ManualClock
) -> None:
    """An event's data that is not JSON: the job's trace is STORE_DAMAGED naming the job and
    the event, with a fix that prints the job's events as stored."""
    await driver.enqueue([_item(1, clock.now_ms())])
    (claimed,) = await driver.claim("w", 1, 60_000)
    await driver.nack("job1", claimed.token, NackOptions(error=_failure(), delay_ms=1_000))
    _another_program(tmp_path, "UPDATE mcp_jobs_events SET data = 'not json' WHERE job_id = 'job1'")

    with pytest.raises(JobsError) as raised:
        await driver.load_trace("job1")
    error = raised.value
    assert (error.code, error.retryable) == ("STORE_DAMAGED", False)
    assert "job job1, event 'retried at" in error.cause
    ran = await run_fix(error.fix)
    assert ran.returncode == 0 and b"retried at" in ran.stdout and b"'not json'" in ran.stdout
    assert (await driver.get("job1")).state == "delayed"  # the job's own row reads as before


def _failure() -> ErrorPayload:
    return ErrorPayload(code="JOB_FAILED", title="t", cause="boom", fix="retry", retryable=True)


def _another_program(tmp_path: Path, sql: str) -> list[tuple[Any, ...]]:
    """Run `sql` on the jobs file through a connection of its own, as another program would."""
    other = sqlite3.connect(tmp_path / "jobs.db")
    try:
        rows = other.execute(sql).fetchall()
        other.commit()
        return rows
    finally:
        other.close()


def _overwrite(tmp_path: Path, sql: str) -> Overwrite:
    async def overwrite(row_id: str) -> None:
        _another_program(tmp_path, sql.replace("?", f"'{row_id}'"))

    return overwrite


async def test_a_worker_row_another_program_wrote_is_passed_over(
    driver: SqliteDriver, tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    overwrite = _overwrite(tmp_path, "UPDATE mcp_jobs_workers SET queues = 'not json' WHERE id = ?")
    await check_presence_passes_over(driver, clock.now_ms(), overwrite, caplog)


async def test_a_pause_another_program_wrote_still_holds_and_resuming_lifts_it(
    driver: SqliteDriver, tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    sql = "UPDATE mcp_jobs_pauses SET paused_at = 'abc', reason = x'00ff' WHERE name = ?"
    stray = "INSERT INTO mcp_jobs_pauses (kind, name, paused_at) VALUES ('queue', x'00ff', 1)"

    async def write_stray() -> None:
        _another_program(tmp_path, stray)

    await check_pause_details_left_out(
        driver, clock.now_ms(), _overwrite(tmp_path, sql), caplog, write_stray
    )


async def test_an_outbox_row_another_program_wrote_is_passed_over(
    driver: SqliteDriver, tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    overwrite = _overwrite(tmp_path, "UPDATE mcp_jobs_outbox SET request = 'not json' WHERE id = ?")
    requests = [_item(n, clock.now_ms()) for n in (1, 2)]
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    await check_outbox_passes_over(
        driver, url, builtin_app_transaction, requests, overwrite, caplog, clock.advance
    )
    assert _another_program(tmp_path, "SELECT request FROM mcp_jobs_outbox ORDER BY id") == [
        ("not json",),
        (requests[1].to_json(),),
    ]


async def test_a_task_state_and_leases_another_program_wrote_leave_the_scheduler_going(
    file_jobs: Jobs,
    tmp_path: Path,
    clock: ManualClock,
    registry: JobRegistry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def spoil(_: str) -> None:
        for table, column in [
            ("scheduler_state", "last_fired_at"),
            ("leaders", "expires_at"),
        ]:
            _another_program(tmp_path, f"UPDATE mcp_jobs_{table} SET {column} = 'abc'")

    await check_scheduler_goes_on(file_jobs, registry, clock.advance, spoil, caplog)


async def test_a_rate_key_and_reservation_another_program_wrote_leave_the_jobs_running(
    file_jobs: Jobs, tmp_path: Path, clock: ManualClock, registry: JobRegistry
) -> None:
    spoil_key = _overwrite(tmp_path, "UPDATE mcp_jobs_rate_limits SET tat = 'abc' WHERE key = ?")
    sql = "UPDATE mcp_jobs_rate_reservations SET slot_at = 'abc' WHERE job_id = ?"
    await check_rate_limits_go_on(
        file_jobs, registry, clock.advance, spoil_key, _overwrite(tmp_path, sql)
    )
    _another_program(tmp_path, "UPDATE mcp_jobs_rate_limits SET tat = 'abc'")
    assert await file_jobs.driver.forget_idle_rates(0, 10) == 1  # no take can read it


async def test_a_cap_holder_another_program_wrote_holds_nothing(
    file_jobs: Jobs, tmp_path: Path, registry: JobRegistry
) -> None:
    sql = "INSERT INTO mcp_jobs_leases (key, job_id, expires_at) VALUES (?, 'gone', 'abc')"
    await check_caps_go_on(file_jobs, registry, _overwrite(tmp_path, sql))


async def test_a_descriptor_another_program_wrote_is_forgotten_by_the_pruner(
    file_jobs: Jobs, tmp_path: Path, clock: ManualClock, registry: JobRegistry
) -> None:
    sql = "UPDATE mcp_jobs_descriptors SET descriptor = 'not json', published_at = 'abc'"
    spoil = _overwrite(tmp_path, sql + " WHERE name = ?")
    await check_pruner_forgets_a_damaged_descriptor(file_jobs, registry, clock.advance, spoil)


async def test_a_backfill_run_another_program_wrote_is_damage_named_by_its_run(
    driver: SqliteDriver, tmp_path: Path, clock: ManualClock
) -> None:
    sql = "UPDATE mcp_jobs_backfills SET cursor = 'not json' WHERE run_id = ?"
    error = await check_ledger_row_is_damage(driver, clock.now_ms(), _overwrite(tmp_path, sql))
    ran = await run_fix(error.fix)
    assert (ran.returncode, ran.stdout) == (0, b"cursor: 'not json'\n"), ran


async def test_an_inbound_event_another_program_wrote_fails_its_waiter_for_good(
    file_jobs: Jobs, tmp_path: Path, registry: JobRegistry
) -> None:
    sql = "UPDATE mcp_jobs_inbound_events SET payload = 'not json' WHERE id = ?"
    error = await check_a_wait_fails_on_a_damaged_event(
        file_jobs, registry, _overwrite(tmp_path, sql)
    )
    ran = await run_fix(error.fix)
    assert (ran.returncode, ran.stdout) == (0, b"payload: 'not json'\n"), ran
