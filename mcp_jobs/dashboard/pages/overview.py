"""The overview: one row per queue with `queue_stats`' counts, the sampled sparklines, pauses,
rate limits and `diagnose_queue`'s findings. Reloads itself every few seconds.

Its rows are the busiest queues `queue_stats` lists, with a row of totals over all, and its
findings those `diagnose_queue` lists, so a page stays small at any number of queues;
`?queue=NAME` shows one queue and its whole diagnosis."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request

from mcp_jobs.dashboard.actions import action_url, flash_of, offered
from mcp_jobs.dashboard.html import age, e, link, path, sparkline, table, when
from mcp_jobs.dashboard.query import read_query
from mcp_jobs.operations.diagnose import diagnose_queue
from mcp_jobs.operations.models import QueueStatsView, QueueTotals, RateLimitView
from mcp_jobs.operations.stats import queue_stats

if TYPE_CHECKING:
    from mcp_jobs.dashboard.app import Dashboard

REFRESH_MS = 5000
# (contract field, the QueueStatsView attribute it shows)
FIELDS = (
    ("ready", "ready"),
    ("running", "running"),
    ("delayed", "delayed"),
    ("suspended", "suspended"),
    ("dead", "dead"),
    ("failed", "failed"),
    ("done", "done"),
    ("cancelled", "cancelled"),
    ("oldest_ready_age_ms", "oldest_ready_ms"),
)
RECENT = ("done", "cancelled")


def _cell(queue: str, name: str, value: int, href: str | None, title: str | None) -> str:
    shown = age(value) if name == "oldest_ready_age_ms" and value else str(value)
    text = link(href, shown) if href and value else e(shown)
    hint = f' title="{e(title)}"' if title else ""
    testid = f"queue:{e(queue)}:{name}"
    return f'<td class="n" data-testid="{testid}" data-value="{value}"{hint}>{text}</td>'


def _limits(limits: list[RateLimitView] | None) -> str:
    return "; ".join(f"{e(r.key)}: {e(r.rate)}" for r in limits or [])


def _row(dash: Dashboard, q: QueueStatsView) -> str:
    cells = []
    for name, attr in FIELDS:
        state = name if name in ("ready", "running", "delayed", "suspended", "dead") else None
        href = (
            path(dash.prefix, "jobs", query={"queue": q.queue, "state": state}) if state else None
        )
        # Done and cancelled count a recent window: an hour, shorter when jobs finish fast.
        window = f"in the last {age(q.settled_window_ms)}" if name in RECENT else None
        cells.append(_cell(q.queue, name, int(getattr(q, attr)), href, window))
    # The sampler reads every tenant's jobs: a token pinned to one is not shown them.
    depth = rate = '<span class="muted">not shown</span>'
    if dash.sampled_for_request():
        samples = dash.sampler.series(q.queue)
        depth = sparkline([s.depth for s in samples], f"spark:{q.queue}:depth")
        rate = sparkline([s.throughput_per_min for s in samples], f"spark:{q.queue}:throughput")
    paused = ""
    if q.paused is not None:
        why = f" ({q.paused.reason})" if q.paused.reason else ""
        paused = f'<span class="warn" data-testid="paused:{e(q.queue)}">paused{e(why)}</span> '
    action = ""
    verb = "resume" if q.paused is not None else "pause"
    if offered(dash, verb):
        href = action_url(dash, verb, {"queue": q.queue})
        action = link(href, verb, data_testid=f"{verb}:{q.queue}")
    name = link(path(dash.prefix, "jobs", query={"queue": q.queue}), q.queue)
    return (
        f'<tr data-queue="{e(q.queue)}"><td>{name}</td>{"".join(cells)}'
        f"<td>{depth}</td><td>{rate}</td><td>{paused}{_limits(q.rate_limits)} {action}</td></tr>"
    )


def _totals(totals: QueueTotals) -> str:
    """The row of every queue read, those left out of the rows above included."""
    cells = "".join(
        f'<td class="n" data-testid="totals:{name}" data-value="{getattr(totals, name)}">'
        f"{getattr(totals, name)}</td>"
        if hasattr(totals, name)
        else "<td></td>"
        for name, _ in FIELDS
    )
    return f"<tr><td>all {totals.queues} queues</td>{cells}<td></td><td></td><td></td></tr>"


def _filter(dash: Dashboard, queue: str | None, left_out: int | None) -> str:
    """What the rows leave out, and the form that shows one queue."""
    field = f'<input name="queue" value="{e(queue or "")}">'
    form = f'<form method="get" class="inline">queue {field} <button>show</button></form>'
    if queue:
        form += " " + link(path(dash.prefix, ""), "all queues")
    said = (
        f"{left_out} more queue(s), with fewer jobs, are counted in the totals row only. "
        if left_out
        else ""
    )
    return f'<p data-testid="queues-left-out">{e(said)}{form}</p>'


async def render(dash: Dashboard, request: Request) -> str:
    # `flash` names the message of the action that redirected here.
    queue = read_query(request, dash.prefix, "", ("queue", "flash"))["queue"] or None
    stats = await queue_stats(dash.scope(), [queue] if queue else None)
    queues = stats.queues or []
    head = ["queue", *(f.removesuffix("_age_ms").replace("_", " ") for f, _ in FIELDS)]
    head += ["depth (1 h)", "settled/min (1 h)", "controls"]
    rows = [_row(dash, q) for q in queues]
    if stats.totals is not None and stats.totals.queues > 1:
        rows.append(_totals(stats.totals))
    body = table(head, rows, data_testid="queues")
    body += _filter(dash, queue, stats.queues_left_out)
    if not queues:
        body += "<p>No queue holds a job yet.</p>"
    for p in stats.paused_jobs or []:
        body += (
            f'<p class="warn" data-testid="paused-job:{e(p.name)}">job {e(p.name)} paused by '
            f"{e(p.paused_by)} since {e(when(p.paused_at))} {e(p.reason or '')}</p>"
        )
    if stats.tenant_rate_limits:
        body += f"<p>tenant rate limits: {_limits(stats.tenant_rate_limits)}</p>"
    diagnosis = await diagnose_queue(dash.scope(), queue)
    findings = [
        f'<tr data-testid="finding:{e(f.code)}"><td>{e(f.severity)}</td><td>{e(f.code)}</td>'
        f"<td>{e(f.queue or '')}</td><td>{e(f.cause)}</td><td><code>{e(f.fix)}</code></td></tr>"
        for f in diagnosis.findings or []
    ]
    body += "<h2>Diagnosis</h2>" + (
        table(["severity", "code", "queue", "cause", "fix"], findings)
        if findings
        else '<p data-testid="healthy">Healthy: nothing stuck.</p>'
    )
    every = REFRESH_MS // 1000
    body += f'<p class="muted">read at {e(when(stats.at))} UTC; reloads every {every} s</p>'
    return dash.frame("Queues", body, flash=flash_of(request), refresh_ms=REFRESH_MS)
