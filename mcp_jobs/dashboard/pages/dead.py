"""Dead letters grouped by error code (`operations.dead_letters`), newest group example shown."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request

from mcp_jobs.dashboard.html import e, link, path, table, when
from mcp_jobs.dashboard.query import read_query
from mcp_jobs.operations.dead_letters import dead_letters

if TYPE_CHECKING:
    from mcp_jobs.dashboard.app import Dashboard


async def render(dash: Dashboard, request: Request) -> str:
    queue = read_query(request, dash.prefix, "dead", ("queue",))["queue"] or None
    scope = dash.scope()
    r = scope.fixes.qualify_all(await dead_letters(scope, queue))
    rows = []
    for g in r.groups or []:
        example = g.example
        rows.append(
            f'<tr><td><b>{e(g.code)}</b></td><td class="n" data-testid="dead:{e(g.code)}" '
            f'data-value="{g.count}">{g.count}</td><td>{e(", ".join(g.queues))}</td>'
            f"<td>{link(path(dash.prefix, 'jobs', g.newest_job_id), g.newest_job_id)} "
            f"{e(when(g.newest_at))}</td><td>{e(example.cause if example else '')}</td>"
            f"<td><code>{e(example.fix if example else '')}</code></td></tr>"
        )
    read, total = r.read or 0, r.total or 0
    note = (
        f"all {total} dead jobs"
        if r.complete
        else f"the newest {read} of {total} dead jobs (older ones are not grouped here)"
    )
    listed = path(dash.prefix, "jobs", query={"state": "dead", "queue": queue})
    body = (
        f'<p data-testid="dead-total" data-value="{total}">Grouped: {e(note)}. '
        f"{link(listed, 'list them')}</p>"
    )
    body += table(["code", "jobs", "queues", "newest", "cause", "fix"], rows)
    return dash.frame("Dead letters", body)
