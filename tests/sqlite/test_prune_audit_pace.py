"""`prune_history`'s (and `db prune`'s) batches of audit events of no job pause on SQLite as its
job-row batches do (engine.pruner.batch_pause_ms): at least as long as the batch held the one
write lock. They only yielded to the event loop, so a long run of audit deletes held the lock
from a drain beside it. Other drivers keep the yield. Batches "take" time by moving the manual
clock; nothing here sleeps to wait for time."""

from __future__ import annotations

from pathlib import Path

import anyio

from engine import JobRegistry, Jobs, connect
from engine.retention import DAY_MS
from mcp_jobs import operations
from mcp_jobs.config import Settings
from mcp_jobs.operations.prune import PruneHistoryResult
from mcp_jobs.operations.scope import Scope
from tests.engine.test_pruner_throttle import WatchedClock
from tests.sqlite.test_prune_pace import BATCH_MS, _run_pausing


async def _slow_audit(url: str, clock: WatchedClock, n: int) -> Jobs:
    """`n` audit events of no job past the 90-day audit retention, on a store whose every
    batch of audit deletes takes BATCH_MS of the clock."""
    jobs = await connect(url, clock=clock, registry=JobRegistry())
    for _ in range(n):
        await jobs.record_event("mcp.call", actor="agent")
    clock.advance(91 * DAY_MS)
    forget = jobs.driver.forget_jobless_events

    async def slow(before: int, limit: int) -> int:
        gone = await forget(before, limit)
        clock.advance(BATCH_MS)
        return gone

    jobs.driver.forget_jobless_events = slow  # type: ignore[method-assign]
    return jobs


async def _prune(jobs: Jobs, results: list[PruneHistoryResult]) -> None:
    scope = Scope(jobs, Settings(), "prune_history", "test")
    results.append(await operations.prune_history(scope, write=True, batch_size=5))


async def test_sqlite_audit_batches_pause_as_long_as_each_took(tmp_path: Path) -> None:
    clock = WatchedClock()
    jobs = await _slow_audit(f"sqlite:///{tmp_path}/jobs.db", clock, 12)
    try:
        results: list[PruneHistoryResult] = []
        await _run_pausing(clock, 2, lambda: _prune(jobs, results))
        assert clock.sleeps == [BATCH_MS, BATCH_MS]  # none after the short third batch
        assert results[0].audit_events == 12 and results[0].more is False
    finally:
        await jobs.close()


async def test_a_row_locking_store_only_yields_between_audit_batches() -> None:
    clock = WatchedClock()
    jobs = await _slow_audit("memory://", clock, 12)
    try:
        results: list[PruneHistoryResult] = []
        with anyio.fail_after(5):
            await _prune(jobs, results)
        assert clock.sleeps == [] and results[0].audit_events == 12
    finally:
        await jobs.close()
