"""`diagnose_queue` (and the dashboard overview, which calls it every reload) looks for the live
pass jobs of declared backfills only when some backfill is declared: that look walks every live
row on PostgreSQL (no index leads by name on the live side), 22 ms at 100,000 live rows, for an
answer that is empty by construction when nothing is declared."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Jobs
from engine.internal_jobs import PASS_JOB
from tests.mcp.conftest import OpenMcp


@pytest.mark.drivers(
    "memory", "sqlite", reason="which reads are made does not depend on the driver"
)
async def test_a_diagnosis_with_no_backfill_declared_reads_no_pass_jobs(
    jobs: Jobs, open_mcp: OpenMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[dict[str, Any]] = []
    listed = jobs.list

    async def counted(**filters: Any) -> Any:
        asked.append(filters)
        return await listed(**filters)

    monkeypatch.setattr(jobs, "list", counted)
    async with open_mcp() as mcp:
        await mcp.ok("enqueue_job", {"name": "greet", "input": {"user_id": 1}})
        answer = await mcp.ok("diagnose_queue", {})
        assert not any(f["code"] == "BACKFILL_PENDING" for f in answer["findings"])
        assert [f for f in asked if f.get("name") == PASS_JOB] == []
        assert (await mcp.ok("diagnose_queue", {"queue": "mail"}))["ok"]
        assert [f for f in asked if f.get("name") == PASS_JOB] == []
