"""Migration 0019 adds a worker's caps as a nullable column: a presence row stored before it
reads as a worker with no caps, and its next beat stores them."""

from __future__ import annotations

from pathlib import Path

from engine import ManualClock
from engine.drivers.sqlite import SqliteDriver
from engine.testing.kit.test_published_caps import beat
from tests.sqlite.earlier_schema import migrated_before


async def test_a_presence_row_stored_before_caps_were_reads_as_a_worker_with_none(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "jobs.db"
    conn = migrated_before(path, 19)
    now = clock.now_ms()
    conn.execute(
        "INSERT INTO mcp_jobs_workers (id, hostname, pid, queues, concurrency, started_at, "
        "last_seen_at) VALUES ('before', 'host', 1, '[\"emails\"]', 4, ?, ?)",
        (now, now),
    )
    conn.close()
    driver = SqliteDriver(str(path), clock=clock)
    try:
        await driver.migrate()
        [worker] = await driver.live_workers(0)
        assert (worker.id, worker.queues, worker.caps) == ("before", ["emails"], None)
        await driver.worker_seen(beat("before", now, {"queue:emails": 3}))
        [worker] = await driver.live_workers(0)
        assert worker.caps == {"queue:emails": 3}
    finally:
        await driver.close()
