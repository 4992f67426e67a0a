"""Queue statistics (`queue_stats`): the driver's per-queue counts, one tenant's under a pin."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_jobs.operations.models import QueueStatsResult
from mcp_jobs.operations.scope import Scope


async def queue_stats(scope: Scope, queues: Sequence[str] | None = None) -> QueueStatsResult:
    tenant = scope.tenant(None)
    now = scope.jobs.clock.now_ms()
    counted = await scope.jobs.stats(queues, tenant_id=tenant)
    return QueueStatsResult(ok=True, queues=counted, tenant_id=tenant, at=now)
