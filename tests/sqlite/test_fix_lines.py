"""The fixes of a locked file and of a dedupe index that is not as declared (damaged, dropped, or
disagreeing with the live-row lookup) run as given where only Python is installed, and do what
they say: the first names the process that holds the lock, the second rebuilds the index so
that enqueue works again."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process

from engine import ManualClock
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite.errors import live_key_off
from engine.drivers.sqlite.library import sqlite3
from engine.errors import JobsError
from schemas.jobs import EnqueueRequest
from tests.sqlite.fix_runner import run_fix

START = 1_767_225_600_000
NOBODY = 65534
# The interpreter another user may run: this test's own may sit under root's home.
SYSTEM_PYTHON = "/usr/bin/python3"

# A second process that takes the write lock, says so, and keeps it until its stdin closes.
HOLD_THE_LOCK = (
    "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
    "db.execute('BEGIN IMMEDIATE'); print('locked', flush=True); sys.stdin.read()"
)


def request(n: int, key: str) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"job{n:05d}",
        run_id=f"run{n:05d}",
        name="item",
        queue="default",
        idempotency_key=key,
        input={"n": n},
        run_at=START,
        max_attempts=3,
    )


@pytest.fixture
async def driver(tmp_path: Path, clock: ManualClock) -> AsyncIterator[SqliteDriver]:
    # busy_timeout 0: a held lock fails the driver's rounds at once instead of after seconds.
    d = SqliteDriver(str(tmp_path / "jobs.db"), clock=clock, busy_timeout_ms=0)
    await d.migrate()
    yield d
    await d.close()


@pytest.fixture
async def holder(driver: SqliteDriver) -> AsyncIterator[Process]:
    """Another process holding the write lock on the driver's file."""
    async with await anyio.open_process([sys.executable, "-c", HOLD_THE_LOCK, driver.path]) as p:
        assert p.stdout is not None and p.stdin is not None
        with anyio.fail_after(30):
            said = b""
            while b"\n" not in said:
                said += await p.stdout.receive()
        assert said == b"locked\n"
        yield p
        await p.stdin.aclose()
        with anyio.fail_after(30):
            assert await p.wait() == 0


async def busy_fix(driver: SqliteDriver) -> str:
    with pytest.raises(JobsError) as raised:
        await driver.enqueue([request(1, "k1")])
    assert raised.value.code == "DRIVER_UNAVAILABLE"
    cause = raised.value.__cause__
    assert isinstance(cause, sqlite3.OperationalError)
    assert cause.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return raised.value.fix


async def test_a_locked_file_names_the_process_holding_the_lock(
    driver: SqliteDriver, holder: Process
) -> None:
    fix = await busy_fix(driver)
    ran = await run_fix(fix)
    assert ran.returncode == 0, ran.stderr
    held = {line.split(" ", 1)[0]: line for line in ran.stdout.decode().splitlines()}
    # The holder by pid, with its command line; this process has the file open too.
    assert "BEGIN IMMEDIATE" in held[str(holder.pid)], ran.stdout
    assert str(os.getpid()) in held, ran.stdout


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON),
    reason=f"runs the line as another user (needs root) with {SYSTEM_PYTHON}",
)
async def test_the_lock_line_run_by_a_user_who_may_not_look_says_so(
    driver: SqliteDriver, holder: Process
) -> None:
    fix = await busy_fix(driver)
    # Another user may not read this root-owned test's /proc/PID/fd: skipped and counted, and
    # the line still exits cleanly.
    ran = await run_fix(fix, python3=SYSTEM_PYTHON, user=NOBODY)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.decode().splitlines()
    assert str(holder.pid) not in {line.split(" ", 1)[0] for line in lines}
    assert any(line.startswith("no process this user may inspect has ") for line in lines), lines
    assert any(
        line.endswith(" more processes whose open files this user may not read") for line in lines
    ), lines


async def test_an_index_that_disagrees_with_the_live_lookup_is_rebuilt_by_the_fix(
    driver: SqliteDriver,
) -> None:
    (first,) = await driver.enqueue([request(1, "key")])
    # An index like an older schema's: ON CONFLICT matches it (only the collation differs),
    # but it calls "KEY" taken by "key" where FIND_LIVE, comparing exactly, finds no holder.
    damage = sqlite3.connect(driver.path, isolation_level=None)
    (declared,) = damage.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'mcp_jobs_jobs_live_key'"
    ).fetchone()
    damage.execute("DROP INDEX mcp_jobs_jobs_live_key")
    damage.execute(declared.replace("idempotency_key)", "idempotency_key COLLATE NOCASE)"))
    damage.close()
    with pytest.raises(JobsError) as raised:
        await driver.enqueue([request(2, "KEY")])
    assert raised.value.code == "DRIVER_UNAVAILABLE"

    ran = await run_fix(raised.value.fix)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == b"ok\n"  # the integrity check of the jobs table, after the rebuild
    check = sqlite3.connect(driver.path)
    (rebuilt,) = check.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'mcp_jobs_jobs_live_key'"
    ).fetchone()
    check.close()
    assert rebuilt == declared
    (second,) = await driver.enqueue([request(2, "KEY")])
    (again,) = await driver.enqueue([request(3, "key")])
    assert not second.deduped
    assert again.deduped and again.id == first.id


async def test_a_dropped_dedupe_index_is_rebuilt_by_the_fix_not_left_to_migrate(
    driver: SqliteDriver,
) -> None:
    await driver.enqueue([request(1, "key")])
    assert not await driver._exec.run(live_key_off, write=False)  # as migrated: as declared
    damage = sqlite3.connect(driver.path, isolation_level=None)
    damage.execute("DROP INDEX mcp_jobs_jobs_live_key")
    damage.close()
    # One job and a batch: both insert statements name the index as their ON CONFLICT target.
    for batch in ([request(2, "other")], [request(2, "other"), request(3, "third")]):
        with pytest.raises(JobsError) as raised:
            await driver.enqueue(batch)
        assert raised.value.code == "DRIVER_UNAVAILABLE"
        assert isinstance(raised.value.__cause__, sqlite3.OperationalError)

    ran = await run_fix(raised.value.fix)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == b"ok\n"
    assert not await driver._exec.run(live_key_off, write=False)
    (again,) = await driver.enqueue([request(4, "key")])
    assert again.deduped and again.id == "job00001"
    assert [r.deduped for r in await driver.enqueue([request(2, "other"), request(3, "3")])] == [
        False,
        False,
    ]
