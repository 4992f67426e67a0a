"""Staged outbox rows not yet published (engine/outbox.py), as `queue_stats` and
`diagnose_queue` show them.

A staged row becomes a job only when a worker's relay publishes it, so rows waiting with no
live worker wait for good, though no queue counts them. The read is bounded: counted up to
WAITING_BOUND on the index of unpublished rows, the oldest its first entry. Rows are counted for
the whole database: their queue and tenant sit inside the staged request, which no index reads,
so a caller pinned to a tenant, or asking about named queues, is shown none.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.drivers.base import OUTBOX, require
from engine.metrics import LIVE_WORKER_WINDOW_MS
from mcp_jobs.operations.models import Finding, OutboxView
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.workers import app_unknown, worker_command

# Waiting rows counted at most per answer (a count this high reads "at least").
WAITING_BOUND = 10_000


async def outbox_waiting(scope: Scope, queues: Sequence[str] | None = None) -> OutboxView | None:
    """The rows waiting to be published; None when none wait, or none are shown here."""
    driver = scope.jobs.driver
    if queues or scope.tenant(None) is not None or not OUTBOX.offered_by(driver):
        return None
    found = await require(driver, OUTBOX).outbox_waiting(WAITING_BOUND)
    if not found.count or found.oldest_staged_at is None:
        return None
    return OutboxView(
        waiting=found.count,
        at_least=found.count >= WAITING_BOUND,
        oldest_staged_at=found.oldest_staged_at,
    )


def outbox_findings(scope: Scope, outbox: OutboxView | None, workers: int) -> list[Finding]:
    """OUTBOX_WAITING: critical with no live worker (no relay runs, so none is ever published),
    a warning once the oldest waited past the backlog threshold beside live workers, info while
    they are on their way. The fix starts a worker, whose relay publishes them at its start."""
    if outbox is None:
        return []
    now = scope.jobs.clock.now_ms()
    age_ms = max(0, now - outbox.oldest_staged_at)
    count = f"at least {outbox.waiting}" if outbox.at_least else str(outbox.waiting)
    waiting = (
        f"{count} staged job(s) wait in the outbox to be published, the oldest staged "
        f"{age_ms // 1000} s ago"
    )
    threshold = scope.settings.limits.backlog_age_ms
    if not workers:
        severity = "critical"
        cause = (
            f"{waiting}, and no worker has checked in during the last "
            f"{LIVE_WORKER_WINDOW_MS // 1000} s: only a worker's relay publishes them"
            + app_unknown(scope)
        )
    elif age_ms > threshold:
        severity = "warning"
        cause = (
            f"{waiting} (threshold {threshold // 1000} s) beside {workers} live worker(s): their "
            "relays are off (outbox_relay=False) or these rows fail to publish (a worker's log "
            "says why); a worker started now publishes them at its start"
        )
    else:
        severity = "info"
        cause = f"{waiting}; a live worker's relay publishes them"
    return [
        Finding(code="OUTBOX_WAITING", severity=severity, cause=cause, fix=worker_command(scope))
    ]
