"""`prune_history` write reports progress, one notification per batch (batches done of the
call's maximum), as wait_for_job and run_backfill report theirs."""

from __future__ import annotations

from engine import JobRegistry, Jobs, ManualClock, Worker
from engine.retention import DAY_MS
from mcp_jobs import operations
from mcp_jobs.config import Settings
from mcp_jobs.operations.prune import TOOL_MAX_BATCHES
from mcp_jobs.operations.scope import Scope
from tests.mcp.conftest import OpenMcp

Seen = list[tuple[float, float | None, str | None]]


async def _expired(jobs: Jobs, clock: ManualClock, count: int) -> None:
    for user_id in range(1, count + 1):
        await jobs.enqueue("greet", {"user_id": user_id})
    await Worker(jobs, queues="*", prune=False).run_until_idle()
    clock.advance(8 * DAY_MS)


async def test_each_batch_is_reported(jobs: Jobs, clock: ManualClock, app: JobRegistry) -> None:
    await _expired(jobs, clock, 4)
    seen: Seen = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    scope = Scope(jobs, Settings(), "prune_history", "test", progress=on_progress)
    pruned = await operations.prune_history(scope, write=True, batch_size=1, max_batches=3)
    assert pruned.batches == 3 and pruned.more is True
    assert seen == [(n, 3.0, f"batch {n:.0f}: {n:.0f} rows pruned") for n in (1.0, 2.0, 3.0)]
    seen.clear()
    rest = await operations.prune_history(scope, write=True, batch_size=1)
    assert rest.more is False and rest.by_state is not None and rest.by_state["done"] == 1
    # Unbounded: no total; the batch that came back short is the last one told.
    assert [(p, t) for p, t, _ in seen] == [(1.0, None), (2.0, None)]


async def test_a_client_asking_for_progress_receives_it(
    jobs: Jobs, clock: ManualClock, open_mcp: OpenMcp
) -> None:
    await _expired(jobs, clock, 2)
    seen: Seen = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with open_mcp(Settings(confirm_writes=False)) as mcp:
        pruned = await mcp.ok("prune_history", {"write": True}, progress_callback=on_progress)
    assert pruned["by_state"]["done"] == 2
    assert seen == [(1.0, float(TOOL_MAX_BATCHES), "batch 1: 2 rows pruned")]
