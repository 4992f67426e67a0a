"""A diagnosis that waited on the database cannot tell live workers' silence from their absence
(exploreQ): under a SQLite write lock another process held, the workers' check-ins waited too, and
NO_LIVE_WORKERS' fix started a worker beside the live ones. It is DATABASE_WAITED, whose fix is
the diagnosis again; one that answered at once still finds NO_LIVE_WORKERS."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs, ManualClock
from schemas.stats import WorkerInfo
from tests.mcp.conftest import OpenMcp

LOCK_HELD_MS = 25_000


@pytest.fixture
def lock_held(jobs: Jobs, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The presence read answers once a lock held elsewhere lets go: `LOCK_HELD_MS` later."""
    read = jobs.driver.live_workers

    async def after_the_lock(since_ms: int) -> list[WorkerInfo]:
        clock.advance(LOCK_HELD_MS)
        return await read(since_ms)

    monkeypatch.setattr(jobs.driver, "live_workers", after_the_lock)


async def _findings(open_mcp: OpenMcp, arguments: dict[str, Any]) -> dict[str, Any]:
    async with open_mcp() as mcp:
        diagnosis = await mcp.ok("diagnose_queue", arguments)
    return {f["code"]: f for f in diagnosis["findings"]}


@pytest.mark.usefixtures("lock_held")
@pytest.mark.parametrize("arguments", [{}, {"queue": "mail"}])
async def test_a_diagnosis_kept_waiting_does_not_call_the_workers_gone(
    jobs: Jobs, open_mcp: OpenMcp, arguments: dict[str, Any]
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    codes = await _findings(open_mcp, arguments)
    assert "NO_LIVE_WORKERS" not in codes, codes["NO_LIVE_WORKERS"]
    waited = codes["DATABASE_WAITED"]
    assert waited["severity"] == "warning" and "1 job(s) are due" in waited["cause"], waited
    assert f"waited {LOCK_HELD_MS / 1000:.1f} s for the database" in waited["cause"], waited
    assert waited["next_call"] == {"tool": "diagnose_queue", "arguments": arguments}, waited
    assert " jobs diagnose" in waited["fix"], waited["fix"]
    assert ("--queue mail" in waited["fix"]) == bool(arguments), waited["fix"]


async def test_a_diagnosis_answered_at_once_still_finds_no_live_workers(
    jobs: Jobs, open_mcp: OpenMcp
) -> None:
    await jobs.enqueue("greet", {"user_id": 1})
    codes = await _findings(open_mcp, {})
    assert "DATABASE_WAITED" not in codes, codes
    assert codes["NO_LIVE_WORKERS"]["severity"] == "critical", codes
