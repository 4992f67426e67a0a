"""Throughput (`settled_counts`): per queue, the jobs that settled within an interval of
`finished_at`, counted exactly by the driver (engine/settled_counts.py), one tenant's under a
pin. None when the driver cannot count them: the caller estimates instead (the dashboard)."""

from __future__ import annotations

from mcp_jobs.operations.scope import Scope
from schemas.stats import SettledCount


async def settled_counts(
    scope: Scope, since_ms: int, until_ms: int
) -> dict[str, SettledCount] | None:
    """Per queue, jobs with `since_ms <= finished_at < until_ms`, by settled state."""
    tenant = scope.tenant(None)
    return await scope.jobs.settled_counts(since_ms, until_ms, tenant_id=tenant)
