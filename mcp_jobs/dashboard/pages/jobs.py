"""The job list: `list_jobs` newest first, filtered by queue, state, name and tenant, a page at a
time (the operation's cursor in the next-page link)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from starlette.requests import Request

from mcp_jobs.dashboard.html import e, link, path, table, when
from mcp_jobs.dashboard.query import read_query
from mcp_jobs.operations.jobs import list_jobs
from mcp_jobs.operations.models import JobProgressSummary
from schemas.states import JOB_STATES, JobState

if TYPE_CHECKING:
    from mcp_jobs.dashboard.app import Dashboard

PAGE_SIZE = 50
FILTERS = ("queue", "state", "name", "tenant")


def _row(dash: Dashboard, j: JobProgressSummary) -> str:
    code = j.last_error.code if j.last_error is not None else ""
    return (
        f'<tr data-testid="job-row" data-job-id="{e(j.id)}" data-state="{e(j.state)}">'
        f"<td>{link(path(dash.prefix, 'jobs', j.id), j.id)}</td><td>{e(j.name)}</td>"
        f"<td>{e(j.queue)}</td><td>{e(j.tenant_id or '')}</td><td>{e(j.state)}</td>"
        f'<td class="n">{j.attempt}/{j.max_attempts}</td><td>{e(when(j.created_at))}</td>'
        f"<td>{e(when(j.updated_at))}</td><td>{e(code)}</td></tr>"
    )


def _form(asked: dict[str, str]) -> str:
    states = "".join(
        f'<option value="{s}"{" selected" if asked.get("state") == s else ""}>{s}</option>'
        for s in ("", *JOB_STATES)
    )
    inputs = "".join(
        f'<label>{name} <input name="{name}" value="{e(asked.get(name, ""))}"></label> '
        for name in ("queue", "name", "tenant")
    )
    select = f'<label>state <select name="state">{states}</select></label>'
    return f'<form method="get">{inputs}{select} <button>filter</button></form>'


async def render(dash: Dashboard, request: Request) -> str:
    given = read_query(request, dash.prefix, "jobs", (*FILTERS, "cursor"))
    asked = {k: given[k] for k in FILTERS}
    cursor = given["cursor"] or None
    state = asked["state"] or None
    page = await list_jobs(
        dash.scope("jobs ls"),  # a refusal's fix is then the CLI's own list command
        state=cast(JobState, state) if state else None,
        name=asked["name"] or None,
        queue=asked["queue"] or None,
        tenant_id=asked["tenant"] or None,
        limit=PAGE_SIZE,
        cursor=cursor,
    )
    rows = [_row(dash, j) for j in page.jobs or []]
    head = ["id", "name", "queue", "tenant", "state", "attempt", "created", "updated", "error"]
    body = _form(asked) + table(head, rows, data_testid="jobs")
    if not rows:
        body += "<p>No job matches.</p>"
    damaged = [  # rows of this page the store cannot read (STORE_DAMAGED), with their fix
        f'<tr data-testid="damaged" data-job-id="{e(n.job_ids[0])}"><td>{e(n.code)}</td>'
        f"<td>{e(n.cause)}</td><td><code>{e(n.fix)}</code></td></tr>"
        for n in page.notices or []
    ]
    if damaged:
        body += table(["code", "cause", "fix"], damaged, data_testid="notices")
    if page.next_cursor:
        href = path(dash.prefix, "jobs", query={**asked, "cursor": page.next_cursor})
        body += f"<p>{link(href, 'next page →', data_testid='next-page')}</p>"
    return dash.frame("Jobs", body)
