"""Queue statistics (`queue_stats`): the driver's per-queue counts, one tenant's under a pin.

A queue asked for by name must be one this system knows (`operations.known`) or a paused one,
else QUEUE_UNKNOWN lists the known ones: a misspelt queue would otherwise answer an empty,
healthy-looking list. A paused queue that holds no rows is listed with zero counts: a pause made
before the first job (or of a misspelt name) is in force all the same and is shown.

An answer lists the busiest `limit` queues (`busiest`), in name order so a table's rows stay put
between readings, with `queues_left_out` and `totals` over every queue read.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.bounds import MAX_QUEUES
from mcp_jobs.config import SHOWN
from mcp_jobs.errors import LimitExceededError, QueueUnknownError, example_call
from mcp_jobs.operations.answer_bounds import checked_limit
from mcp_jobs.operations.known import unknown_queues
from mcp_jobs.operations.models import QueueStatsResult, QueueStatsView, QueueTotals
from mcp_jobs.operations.outbox import outbox_waiting
from mcp_jobs.operations.pauses import pauses_in_force
from mcp_jobs.operations.rate_limits import rates_by_queue
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.together import together
from schemas.errors import NextCall

# The counts a queue's business is the sum of, and its totals are summed over.
COUNTS = ("ready", "delayed", "running", "suspended", "dead", "failed", "done", "cancelled")


def jobs_counted(view: QueueStatsView) -> int:
    return sum(getattr(view, name) for name in COUNTS)


def busiest(views: Sequence[QueueStatsView], limit: int) -> tuple[list[QueueStatsView], int]:
    """The `limit` queues with the most jobs counted, by name, and how many were left out."""
    if len(views) <= limit:
        return list(views), 0
    kept = sorted(views, key=lambda v: (-jobs_counted(v), v.queue))[:limit]
    return sorted(kept, key=lambda v: v.queue), len(views) - limit


def _too_many(scope: Scope, asked: int) -> LimitExceededError:
    """More names than one call reads (the engine's bound said only "a whole number"). The
    fix leaves them out, too many to echo: every queue, the busiest a page holds."""
    shown = {"limit": scope.settings.limits.max_page_size}
    why = f"ask at most {MAX_QUEUES} per call, or leave queues out for the busiest"
    fix = f"queue_stats {example_call(shown)}"
    call = NextCall(tool="queue_stats", arguments=shown)
    return LimitExceededError("queues", asked, MAX_QUEUES, "queue names", fix, call, why=why)


def totals(views: Sequence[QueueStatsView]) -> QueueTotals:
    sums = {name: sum(getattr(v, name) for v in views) for name in COUNTS}
    return QueueTotals(queues=len(views), **sums)


async def queue_stats(
    scope: Scope, queues: Sequence[str] | None = None, limit: int | None = SHOWN
) -> QueueStatsResult:
    """Every queue read when `limit` is None (diagnose reads them all, then bounds its answer)."""
    if isinstance(queues, list) and len(queues) > MAX_QUEUES:
        raise _too_many(scope, len(queues))
    if limit is not None:
        named = {"queues": list(queues)} if queues else {}
        limit = checked_limit(scope, "queue_stats", limit, named)
    tenant = scope.tenant(None)
    now = scope.jobs.clock.now_ms()
    # Independent reads at once: the pauses, rate limits and outbox (a round trip or two each)
    # take no longer than the counts beside them.
    counting = scope.jobs.stats(queues, tenant_id=tenant)
    counted, pauses, rates, outbox = await together(
        counting, pauses_in_force(scope), rates_by_queue(scope), outbox_waiting(scope, queues)
    )
    by_queue = {p.name: p for p in pauses if p.kind == "queue"}
    if queues and len(counted) < len(set(queues)):
        unknown, known = await unknown_queues(scope, queues)
        unknown = [q for q in unknown if q not in by_queue]
        if unknown:
            raise QueueUnknownError(unknown[0], sorted({*known, *by_queue}))
    shown = [QueueStatsView(**dict(s), paused=by_queue.get(s.queue)) for s in counted]
    counted_queues = {s.queue for s in counted}
    window = {"settled_window_ms": counted[0].settled_window_ms} if counted else {}
    shown += [
        QueueStatsView(queue=name, paused=pause, **window)
        for name, pause in sorted(by_queue.items())
        if name not in counted_queues and (not queues or name in queues)
    ]
    held = [p for p in pauses if p.kind == "job"]
    listed, left_out = busiest(shown, limit) if limit is not None else (shown, 0)
    return QueueStatsResult(
        ok=True,
        queues=rates.attach(listed),
        queues_left_out=left_out or None,
        totals=totals(shown),
        paused_jobs=held or None,
        tenant_id=tenant,
        tenant_rate_limits=rates.tenants or None,
        outbox=outbox,
        at=now,
    )
