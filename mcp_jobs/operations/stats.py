"""Queue statistics (`queue_stats`): the driver's per-queue counts, one tenant's under a pin.

A queue asked for by name must be one this system knows (`operations.known`), else QUEUE_UNKNOWN
lists the known ones: a misspelt queue would otherwise answer an empty, healthy-looking list.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp_jobs.errors import QueueUnknownError
from mcp_jobs.operations.known import unknown_queues
from mcp_jobs.operations.models import QueueStatsResult, QueueStatsView
from mcp_jobs.operations.pauses import pauses_in_force
from mcp_jobs.operations.rate_limits import rates_by_queue
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.together import together


async def queue_stats(scope: Scope, queues: Sequence[str] | None = None) -> QueueStatsResult:
    tenant = scope.tenant(None)
    now = scope.jobs.clock.now_ms()
    # Three independent reads at once: the pauses and rate limits (a round trip or two each)
    # take no longer than the counts beside them.
    counting = scope.jobs.stats(queues, tenant_id=tenant)
    counted, pauses, rates = await together(counting, pauses_in_force(scope), rates_by_queue(scope))
    if queues and len(counted) < len(set(queues)):
        unknown, known = await unknown_queues(scope, queues)
        if unknown:
            raise QueueUnknownError(unknown[0], known)
    by_queue = {p.name: p for p in pauses if p.kind == "queue"}
    shown = [QueueStatsView(**dict(s), paused=by_queue.get(s.queue)) for s in counted]
    held = [p for p in pauses if p.kind == "job"]
    return QueueStatsResult(
        ok=True,
        queues=rates.attach(shown),
        paused_jobs=held or None,
        tenant_id=tenant,
        tenant_rate_limits=rates.tenants or None,
        at=now,
    )
