"""The prune's pause on SQLite is at least as long as the batch before it took (its one write lock
is the drain's too: the prune holds it at most half the time), for the worker's pruner and for
`prune_all` going batch by batch as `db prune` does; other drivers keep the fixed pause. A batch
"takes" time by moving the manual clock; nothing here sleeps to wait for time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio

from engine import JobRegistry, Jobs, connect
from engine.pruner import MAX_PAUSE_MS, Pruner, batch_pause_ms, prune_all
from engine.retention import DAY_MS, DEFAULT_POLICY, Cutoffs, PruneCount, plan
from engine.testing.kit.test_retention import settle
from tests.engine.test_pruner_throttle import WatchedClock

BATCH_MS = 120  # what each batch takes here: longer than the 25 ms pause
PAUSE_MS = 25


async def _slow_jobs(url: str, clock: WatchedClock, n: int) -> Jobs:
    """`n` expired done jobs, on a store whose every prune batch takes BATCH_MS of the clock."""
    jobs = await connect(url, clock=clock, registry=JobRegistry())
    for _ in range(n):
        await settle(jobs.driver, "done")
    clock.advance(8 * DAY_MS)
    prune = jobs.driver.prune

    async def slow(cutoffs: Cutoffs, limit: int, tenant_id: str | None) -> Sequence[PruneCount]:
        got = await prune(cutoffs, limit, tenant_id)
        clock.advance(BATCH_MS)
        return got

    jobs.driver.prune = slow  # type: ignore[method-assign]
    return jobs


async def _run_pausing(clock: WatchedClock, pauses: int, work: object) -> None:
    """Run `work` (an async callable), ending each of its `pauses` pauses by moving the clock
    exactly as long as it asked."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(work)  # type: ignore[arg-type]
        with anyio.fail_after(5):
            for _ in range(pauses):
                await clock.slept.wait()
                clock.advance(clock.sleeps[-1])


def test_the_rule() -> None:
    assert batch_pause_ms("sqlite", BATCH_MS, PAUSE_MS) == BATCH_MS
    assert batch_pause_ms("sqlite", 10, PAUSE_MS) == PAUSE_MS
    assert batch_pause_ms("sqlite", BATCH_MS, 0) == BATCH_MS
    assert batch_pause_ms("sqlite", 10 * MAX_PAUSE_MS, 0) == MAX_PAUSE_MS
    assert batch_pause_ms("postgres", BATCH_MS, PAUSE_MS) == PAUSE_MS
    assert batch_pause_ms("postgres", BATCH_MS, 0) == 0


async def test_sqlite_pruner_pauses_as_long_as_each_batch_took(tmp_path: Path) -> None:
    clock = WatchedClock()
    jobs = await _slow_jobs(f"sqlite:///{tmp_path}/jobs.db", clock, 12)
    try:
        pruner = Pruner(jobs, holder="w1", batch_size=5, pause_ms=PAUSE_MS, environ={})
        reports = []

        async def one_pass() -> None:
            reports.append(await pruner.pass_once())

        await _run_pausing(clock, 2, one_pass)
        assert clock.sleeps == [BATCH_MS, BATCH_MS]  # none after the short third batch
        assert reports[0].batches == 3 and reports[0].by_state()["done"] == 12
    finally:
        await jobs.close()


async def test_sqlite_prune_going_batch_by_batch_pauses_after_each_full_batch(
    tmp_path: Path,
) -> None:
    clock = WatchedClock()
    jobs = await _slow_jobs(f"sqlite:///{tmp_path}/jobs.db", clock, 7)
    try:
        cutoffs = plan(DEFAULT_POLICY, clock.now_ms())
        results = []

        async def one_batch() -> None:
            results.append(await prune_all(jobs, cutoffs, batch_size=5, max_batches=1))

        await _run_pausing(clock, 1, one_batch)  # as `db prune` calls it: pause, then return
        assert clock.sleeps == [BATCH_MS] and results[0][1:] == (1, True)
        with anyio.fail_after(5):
            _, batches, more = await prune_all(jobs, cutoffs, batch_size=5, max_batches=1)
        assert (batches, more, clock.sleeps) == (1, False, [BATCH_MS])  # short: no pause
    finally:
        await jobs.close()


async def test_a_row_locking_store_keeps_the_fixed_pause() -> None:
    clock = WatchedClock()
    jobs = await _slow_jobs("memory://", clock, 12)
    try:
        cutoffs = plan(DEFAULT_POLICY, clock.now_ms())
        with anyio.fail_after(5):  # `db prune`'s pause 0: only a yield, as before
            _, batches, more = await prune_all(jobs, cutoffs, batch_size=5, max_batches=1)
        assert (batches, more, clock.sleeps) == (1, True, [])
        pruner = Pruner(jobs, holder="w1", batch_size=5, pause_ms=PAUSE_MS, environ={})
        await _run_pausing(clock, 1, pruner.pass_once)
        assert clock.sleeps == [PAUSE_MS]
    finally:
        await jobs.close()
