"""Workers with presence: each worker seen within the live window, its queues and last check-in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request

from engine.metrics import LIVE_WORKER_WINDOW_MS
from mcp_jobs.dashboard.html import age, e, table, when
from mcp_jobs.dashboard.query import read_query
from mcp_jobs.operations.workers import live_workers

if TYPE_CHECKING:
    from mcp_jobs.dashboard.app import Dashboard


async def render(dash: Dashboard, request: Request) -> str:
    read_query(request, dash.prefix, "workers", ())  # a filter it has not is refused
    scope = dash.scope()
    # Worker hosts and processes are the operator's machines, serving every tenant.
    scope.across_tenants("the workers page", lambda: scope.fixes.command("jobs", "stats"))
    workers = await live_workers(scope)
    now = dash.jobs.clock.now_ms()
    rows = [
        f'<tr data-testid="worker:{e(w.id)}"><td>{e(w.id)}</td><td>{e(w.hostname)}</td>'
        f'<td class="n">{w.pid}</td><td>{e(", ".join(w.queues) if w.queues else "every queue")}'
        f'</td><td class="n">{w.concurrency}</td><td>{e(when(w.started_at))}</td>'
        f"<td>{e(age(max(now - w.last_seen_at, 0)))} ago</td></tr>"
        for w in workers
    ]
    body = (
        f'<p class="muted">live: checked in during the last {LIVE_WORKER_WINDOW_MS // 1000} s</p>'
        + table(["id", "host", "pid", "queues", "concurrency", "started", "last seen"], rows)
    )
    if not workers:
        body += "<p>No live worker.</p>"
    return dash.frame("Workers", body)
