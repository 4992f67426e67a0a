"""Queue statistics (`queue_stats`): the driver's per-queue counts, one tenant's under a pin.

A queue asked for by name must be one this system knows — the queue of a registered job, one
holding rows (this tenant's, under a pin), or one a live worker serves — else QUEUE_UNKNOWN
lists the known ones: a misspelt queue would otherwise answer an empty, healthy-looking list.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp_jobs.errors import QueueUnknownError
from mcp_jobs.operations.models import QueueStatsResult, QueueStatsView
from mcp_jobs.operations.pauses import pauses_in_force
from mcp_jobs.operations.rate_limits import rates_by_queue
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.together import together
from mcp_jobs.operations.workers import live_workers


async def known_queues(scope: Scope) -> list[str]:
    """Every queue this system knows (see the module docstring), sorted."""
    tenant = scope.tenant(None)
    names = {d.queue for d in await scope.jobs.describe()}
    names.update(s.queue for s in await scope.jobs.stats(None, tenant_id=tenant))
    for worker in await live_workers(scope):
        names.update(worker.queues or ())
    return sorted(names)


async def unknown_queues(scope: Scope, queues: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """(the asked queues this system does not know, the known ones); nothing asked: ([], [])."""
    if not queues:
        return [], []
    known = await known_queues(scope)
    return [q for q in queues if q not in known], known


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
