"""Backfills: each declared one with its ledger state here, the progress of its newest pass and
the last few ledger rows (`list_backfills`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request

from mcp_jobs.dashboard.html import e, link, path, table, when
from mcp_jobs.dashboard.query import read_query
from mcp_jobs.operations.backfills import list_backfills
from mcp_jobs.operations.models import BackfillRunView

if TYPE_CHECKING:
    from mcp_jobs.dashboard.app import Dashboard

LEDGER_ROWS = 5


def _progress(run: BackfillRunView | None) -> str:
    if run is None:
        return '<span class="muted">never run here</span>'
    if run.rows_total:
        return (
            f'<progress value="{run.rows_processed}" max="{run.rows_total}"></progress> '
            f"{run.rows_processed}/{run.rows_total}"
        )
    return f"{run.rows_processed} rows"


def _ledger(runs: list[BackfillRunView]) -> str:
    rows = [
        f"<tr><td>{e(r.run_id)}</td><td>{e(r.status)}</td><td>{_progress(r)}</td>"
        f"<td>{e(when(r.started_at))}</td><td>{e(when(r.finished_at))}</td>"
        f"<td>{e(r.error or '')}</td></tr>"
        for r in runs
    ]
    return table(["run", "status", "rows", "started", "finished", "error"], rows)


async def render(dash: Dashboard, request: Request) -> str:
    read_query(request, dash.prefix, "backfills", ())  # a filter it has not is refused
    scope = dash.scope()
    listed = await list_backfills(scope)
    parts = [f'<p class="muted">environment: {e(listed.environment)}</p>']
    for b in listed.backfills or []:
        runs = (await list_backfills(scope, name=b.name, runs_limit=LEDGER_ROWS)).runs or []
        last = b.last_run
        live = link(path(dash.prefix, "jobs", b.live_job_id), "live pass") if b.live_job_id else ""
        parts.append(
            f'<section data-testid="backfill:{e(b.name)}" data-pending="{str(b.pending).lower()}" '
            f'data-status="{e(last.status if last else "")}" '
            f'data-rows="{last.rows_processed if last else 0}">'
            f"<h2>{e(b.name)}</h2><p>{e(b.description or '')}</p>"
            f"<p>{'pending here' if b.pending else 'applied here'} · batch {b.batch_size} "
            f"· {_progress(last)} {live}</p>{_ledger(runs)}</section>"
        )
    if not listed.backfills:
        parts.append("<p>No backfill is declared (pass --app MODULE).</p>")
    return dash.frame("Backfills", "".join(parts))
