"""What a write to the jobs table costs SQLite beyond its rows: no temporary b-tree for the
partial indexes' state tests (0017), and no WAL checkpoint inside a caller's commit."""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

import anyio
import pytest

from engine import ManualClock
from engine.drivers.sqlite import SqliteDriver
from engine.drivers.sqlite import checkpoints as checkpoints_module
from engine.drivers.sqlite import migrate as m
from engine.drivers.sqlite import queries as q
from engine.drivers.sqlite.checkpoints import BACKSTOP_FRAMES, WAKE_COMMITS
from engine.drivers.sqlite.errors import live_key_off
from engine.drivers.sqlite.library import sqlite3
from tests.sqlite.earlier_schema import migrated_before
from tests.sqlite.enqueues import START, request

# Every statement that writes rows of the jobs table on the hot path.
WRITES = ("INSERT_JOB", "INSERT_JOBS", "CLAIM", "ACK", "ACK_MANY", "UPDATE_JOB")
# The lone-row ones, which read nothing else: no temporary b-tree at all.
LONE_WRITES = ("INSERT_JOB", "ACK", "UPDATE_JOB")


def _temporary_btrees(conn: sqlite3.Connection, sql: str) -> int:
    """How many temporary b-trees the compiled statement opens (EXPLAIN's OpenEphemeral)."""
    params = dict.fromkeys(re.findall(r":(\w+)", sql))
    return sum(1 for row in conn.execute(f"EXPLAIN {sql}", params) if row[1] == "OpenEphemeral")


async def test_the_partial_indexes_add_no_temporary_btree_to_a_write(
    driver: SqliteDriver, tmp_path: Path
) -> None:
    await driver.close()
    bare = tmp_path / "bare.db"
    shutil.copy(tmp_path / "jobs.db", bare)
    conn = sqlite3.connect(bare, isolation_level=None)
    try:
        with_indexes = {name: _temporary_btrees(conn, getattr(q, name)) for name in WRITES}
        partial = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'mcp_jobs_jobs'"
            " AND sql LIKE '%WHERE%'"
        ).fetchall()
        assert len(partial) >= 9
        for (name,) in partial:
            conn.execute(f"DROP INDEX {name}")
        without = {name: _temporary_btrees(conn, getattr(q, name)) for name in WRITES}
    finally:
        conn.close()
    # No more with them than without (SQLite 3.51 even plans CLAIM with one fewer through them).
    assert all(with_indexes[name] <= without[name] for name in WRITES), (with_indexes, without)
    assert all(with_indexes[name] == 0 for name in LONE_WRITES), with_indexes


async def test_no_partial_index_on_jobs_tests_its_states_with_an_in_list(
    driver: SqliteDriver, tmp_path: Path
) -> None:
    await driver.close()
    conn = sqlite3.connect(tmp_path / "jobs.db")
    try:
        rows = conn.execute(
            "SELECT name, sql FROM sqlite_master"
            " WHERE type = 'index' AND tbl_name = 'mcp_jobs_jobs' AND sql IS NOT NULL"
        ).fetchall()
    finally:
        conn.close()
    assert [name for name, sql in rows if re.search(r"\bIN\s*\(", sql)] == []


async def test_a_file_at_version_16_rebuilds_its_indexes_and_keeps_deduping(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    conn = migrated_before(path, 17, START)
    # A live row written by the version-16 build, under its spelling of the live key.
    conn.execute(
        "INSERT INTO mcp_jobs_jobs (id, run_id, name, queue, idempotency_key, input, state,"
        " attempt, max_attempts, run_at, queued_at, created_at, updated_at)"
        " VALUES ('old1', 'oldrun1', 'item', 'default', 'k1', '{}', 'ready', 0, 3, ?, ?, ?, ?)",
        (START, START, START, START),
    )
    assert live_key_off(conn)  # not yet as this build declares it
    conn.close()

    driver = SqliteDriver(str(path), clock=ManualClock(START))
    try:
        await driver.migrate()
        (again,) = await driver.enqueue([request(2, key="k1")])
        (fresh,) = await driver.enqueue([request(3, key="k3")])
    finally:
        await driver.close()
    assert (again.id, again.deduped) == ("old1", True)
    assert not fresh.deduped
    conn = sqlite3.connect(path)
    try:
        assert not live_key_off(conn)
        unique = conn.execute("PRAGMA index_info(mcp_jobs_jobs_live_key)").fetchall()
        versions = [v for (v,) in conn.execute("SELECT version FROM mcp_jobs_migrations")]
    finally:
        conn.close()
    assert len(unique) == 3
    assert versions[-1] == m.migrations()[-1].version  # and every migration after 16


async def test_commits_wake_a_thread_that_checkpoints_the_wal(
    driver: SqliteDriver, tmp_path: Path
) -> None:
    backstop = await driver._exec.run(
        lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0], write=False
    )
    assert backstop == BACKSTOP_FRAMES
    for n in range(WAKE_COMMITS):
        await driver.enqueue([request(n)])
    checkpoints = driver._exec._checkpoints
    assert checkpoints is not None
    # Closing the checkpointer lets it finish the checkpoint it was asked for; the driver's own
    # connection stays open, so nothing else has checkpointed.
    await anyio.to_thread.run_sync(checkpoints.close)
    assert checkpoints.done == 1
    # The database file itself, without its WAL, now holds every job committed before the wake.
    alone = tmp_path / "alone.db"
    shutil.copy(tmp_path / "jobs.db", alone)
    conn = sqlite3.connect(alone)
    try:
        (count,) = conn.execute("SELECT count(*) FROM mcp_jobs_jobs").fetchone()
    finally:
        conn.close()
    assert count >= WAKE_COMMITS - 1, count
    await driver.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("mcp-jobs checkpoints")]


async def test_an_idle_checkpoint_thread_ends_and_the_next_wake_starts_another(
    driver: SqliteDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No wait at all for more work: the thread ends as soon as it has nothing to do.
    monkeypatch.setattr(checkpoints_module, "IDLE_S", 0.0)
    for n in range(WAKE_COMMITS):
        await driver.enqueue([request(n)])
    checkpoints = driver._exec._checkpoints
    assert checkpoints is not None
    first = checkpoints._thread
    assert first is not None
    await anyio.to_thread.run_sync(first.join, 10)
    assert not first.is_alive()
    assert checkpoints._thread is None
    assert checkpoints.done == 1
    for n in range(WAKE_COMMITS, 2 * WAKE_COMMITS):
        await driver.enqueue([request(n)])
    second = checkpoints._thread  # None if it has already run and left
    if second is not None:
        assert second is not first
        await anyio.to_thread.run_sync(second.join, 10)
    assert checkpoints.done == 2
    assert checkpoints._thread is None


async def test_a_commit_stands_when_no_checkpoint_thread_can_start(
    driver: SqliteDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    results = [(await driver.enqueue([request(n)]))[0] for n in range(WAKE_COMMITS + 1)]
    assert [r.deduped for r in results] == [False] * (WAKE_COMMITS + 1)
    checkpoints = driver._exec._checkpoints
    assert checkpoints is not None and checkpoints._thread is None and checkpoints.done == 0
    monkeypatch.undo()
    for n in range(WAKE_COMMITS + 1, 2 * WAKE_COMMITS + 1):
        await driver.enqueue([request(n)])
    await anyio.to_thread.run_sync(checkpoints.close)
    assert checkpoints.done == 1
