"""Staged outbox rows not yet published are shown: `queue_stats` counts them (bounded) and
`diagnose_queue` reports OUTBOX_WAITING with the count and the oldest's age — critical with the
line that starts a worker when none is live to relay them, a warning when they wait past the
backlog threshold beside live workers, info while they are on their way. A tenant-pinned caller
sees neither (outbox rows are not counted per tenant)."""

from __future__ import annotations

from engine import Jobs, ManualClock
from engine.outbox import OutboxRelay
from engine.testing.plugin import builtin_app_transaction
from mcp_jobs.config import Settings
from tests.mcp.conftest import OpenMcp
from tests.support.presence import beat


def _outbox_findings(diagnosis: dict[str, object]) -> list[dict[str, object]]:
    findings = diagnosis["findings"]
    assert isinstance(findings, list)
    return [f for f in findings if f["code"] == "OUTBOX_WAITING"]


async def test_staged_rows_with_no_worker_to_relay_them_are_a_finding(
    jobs: Jobs, clock: ManualClock, database_url: str, open_mcp: OpenMcp
) -> None:
    staged_at = clock.now_ms()
    async with builtin_app_transaction(jobs.driver, database_url) as tx:
        for n in range(3):
            await jobs.stage(tx, "greet", {"user_id": n + 1})
    clock.advance(30_000)

    async with open_mcp() as mcp:
        stats = await mcp.ok("queue_stats", {})
        assert stats["outbox"]["waiting"] == 3 and stats["outbox"]["at_least"] is False
        assert stats["outbox"]["oldest_staged_at"] == staged_at
        diagnosis = await mcp.ok("diagnose_queue", {})
        (finding,) = _outbox_findings(diagnosis)
        assert finding["severity"] == "critical" and diagnosis["healthy"] is False
        assert "3 staged job(s)" in finding["cause"] and "30 s ago" in finding["cause"]
        no_workers = [f for f in diagnosis["findings"] if f["code"] == "NO_LIVE_WORKERS"]
        assert finding["fix"] == (no_workers[0]["fix"] if no_workers else finding["fix"])
        assert "worker" in finding["fix"] or "Worker" in finding["fix"]

    async with open_mcp(Settings(tenant="acme")) as mcp:
        assert "outbox" not in await mcp.ok("queue_stats", {})
        assert _outbox_findings(await mcp.ok("diagnose_queue", {})) == []

    await beat(jobs)  # a live worker relays them: on their way
    async with open_mcp() as mcp:
        (finding,) = _outbox_findings(await mcp.ok("diagnose_queue", {}))
        assert finding["severity"] == "info"
    clock.advance(Settings().limits.backlog_age_ms)
    await beat(jobs)
    async with open_mcp() as mcp:
        (finding,) = _outbox_findings(await mcp.ok("diagnose_queue", {}))
        assert finding["severity"] == "warning"

    assert await OutboxRelay(jobs).run_until_empty() == 3
    async with open_mcp() as mcp:
        assert "outbox" not in await mcp.ok("queue_stats", {})
        assert _outbox_findings(await mcp.ok("diagnose_queue", {})) == []
