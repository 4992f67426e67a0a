"""Pending is declared minus completed in this environment, on every driver."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs, Worker
from engine.backfill import BackfillRegistry, Backfills, backfill


async def test_pending_lists_exactly_the_backfills_not_completed_here(
    jobs: Jobs, backfill_registry: BackfillRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    stalls: set[str] = {"stalls"}

    def declare(name: str, environments: tuple[str, ...] = ()) -> None:
        async def count() -> int:
            return 1 if name in stalls else 0  # "stalls" never empties: its pass fails

        async def read(after: Any, limit: int) -> list[Any]:
            return []

        async def handle(rows: list[Any]) -> None:
            return None

        backfill(
            name=name,
            count=count,
            read=read,
            key=lambda row: row,
            handle=handle,
            environments=environments,
            registry=backfill_registry,
        )

    declare("never_run")
    declare("completed")
    declare("stalls")
    declare("production_only", ("production",))
    declare("completed_in_staging_only")
    development = Backfills(jobs, registry=backfill_registry, environment="development")
    staging = Backfills(jobs, registry=backfill_registry, environment="staging")
    await development.write("completed")
    await development.write("stalls")
    monkeypatch.delenv("MCP_JOBS_ENV", raising=False)  # a pass runs on its environment's worker
    await Worker(jobs).run_until_idle()
    await staging.write("completed_in_staging_only")
    monkeypatch.setenv("MCP_JOBS_ENV", "staging")
    await Worker(jobs).run_until_idle()

    pending = await development.list(pending_only=True)
    assert [s.name for s in pending] == ["completed_in_staging_only", "never_run", "stalls"]
    assert [e.details["backfill"] for e in await development.pending() if e.details] == [
        "completed_in_staging_only",
        "never_run",
        "stalls",
    ]
    assert {e.code for e in await development.pending()} == {"BACKFILL_PENDING"}

    states = {s.name: s for s in await development.list()}
    assert sorted(states) == [
        "completed",
        "completed_in_staging_only",
        "never_run",
        "production_only",
        "stalls",
    ]
    assert states["completed"].last_run is not None
    assert states["completed"].last_run.status == "completed"
    assert states["stalls"].last_run is not None and states["stalls"].last_run.status == "failed"
    assert states["never_run"].last_run is None
    # The staging run is staging's: development's view of that backfill has no run.
    assert states["completed_in_staging_only"].last_run is None
    assert states["production_only"].environments == ["production"]
    assert not states["production_only"].pending

    assert [s.name for s in await staging.list(pending_only=True)] == [
        "completed",
        "never_run",
        "stalls",
    ]
