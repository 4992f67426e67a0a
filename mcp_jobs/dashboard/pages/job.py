"""One job: `inspect_job`'s record, a Gantt-like step timeline (a bar per step, placed by its
start and end, its attempts on the bar), the events and the structured error."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request

from engine.rules import can_retry
from mcp_jobs.dashboard.actions import action_url, flash_of, offered
from mcp_jobs.dashboard.html import age, as_json, e, error_box, link, path, table, when
from mcp_jobs.dashboard.query import read_query
from mcp_jobs.operations.jobs import inspect_job
from mcp_jobs.operations.models import InspectJobResult, StepView
from schemas.states import LIVE_STATES, RUN_NOW_STATES

if TYPE_CHECKING:
    from mcp_jobs.dashboard.app import Dashboard


def timeline(steps: list[StepView], now: int) -> str:
    """One lane per step, its bar from `started_at` to `finished_at` (now while it runs), on one
    scale from the first start to the last end."""
    if not steps:
        return '<p class="muted">No step recorded.</p>'
    ordered = sorted(steps, key=lambda s: (s.started_at, s.name))
    start = ordered[0].started_at
    end = max(s.finished_at or now for s in ordered)
    span = max(end - start, 1)
    lanes = []
    for s in ordered:
        finish = s.finished_at or now
        left = (s.started_at - start) * 100 / span
        width = max((finish - s.started_at) * 100 / span, 0.5)
        status = e(s.status)
        tip = f"{s.name}: {s.status}, attempts {s.attempts}, {age(max(finish - s.started_at, 0))}"
        lanes.append(
            f'<div class="lane"><span class="label">{e(s.name)} ×{s.attempts}</span>'
            f'<div class="bar s-{status}" data-testid="step-bar" data-step="{e(s.name)}" '
            f'data-status="{status}" data-attempts="{s.attempts}" data-start="{s.started_at}" '
            f'data-end="{s.finished_at if s.finished_at is not None else ""}" '
            f'style="left:{left:.2f}%;width:{width:.2f}%" title="{e(tip)}"></div></div>'
        )
    scale = f'<p class="muted">{e(when(start))} → {e(when(end))} UTC ({e(age(span))})</p>'
    return f'<div class="gantt" data-testid="timeline">{"".join(lanes)}</div>{scale}'


def _actions(dash: Dashboard, r: InspectJobResult) -> str:
    if r.job is None:
        return ""
    job = r.job
    out = []
    if offered(dash, "retry") and can_retry(job.state, include_cancelled=True):
        # A delayed job's retry runs it now instead of at its run_at.
        label = "run now" if job.state in RUN_NOW_STATES else "retry"
        out.append(link(action_url(dash, "retry", {"job_id": job.id}), label, data_testid="retry"))
    if offered(dash, "cancel") and job.state in LIVE_STATES:
        href = action_url(dash, "cancel", {"job_id": job.id})
        out.append(link(href, "cancel", data_testid="cancel"))
    return f"<p>{' · '.join(out)}</p>" if out else ""


async def render(dash: Dashboard, request: Request) -> str:
    job_id = request.path_params["job_id"]
    # `flash` names the message of the action that redirected here.
    read_query(request, dash.prefix, f"jobs/{job_id}", ("flash",))
    scope = dash.scope()
    # Fix lines run as given from anywhere: the effective database and app written in.
    r = scope.fixes.qualify_all(await inspect_job(scope, job_id))
    job = r.job
    assert job is not None  # ok=True carries the job
    now = dash.jobs.clock.now_ms()
    facts = [
        ("state", f'<b data-testid="job-state" data-value="{e(job.state)}">{e(job.state)}</b>'),
        ("name", e(job.name)),
        ("queue", link(path(dash.prefix, "jobs", query={"queue": job.queue}), job.queue)),
        ("tenant", e(job.tenant_id or "")),
        ("attempt", f"{job.attempt} of {job.max_attempts}"),
        ("created", e(when(job.created_at))),
        ("run at", e(when(job.run_at))),
        ("finished", e(when(job.finished_at))),
        ("worker", e(job.worker_id or "")),
        ("idempotency key", e(job.idempotency_key)),
    ]
    if r.lease is not None:
        facts.append(("lease", f"{e(r.lease.worker_id)} until {e(when(r.lease.expires_at))}"))
    if r.retry_delays_ms:
        facts.append(("retry delays", e(", ".join(age(d) for d in r.retry_delays_ms))))
    body = _actions(dash, r)
    body += table([], (f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts))
    if job.last_error is not None:
        body += "<h2>Last error</h2>" + error_box(job.last_error.model_dump())
        trace = (job.last_error.details or {}).get("traceback")
        if isinstance(trace, str):  # a body's own exception: where it was raised
            body += (
                '<details open><summary>traceback</summary><pre data-testid="job-traceback">'
                f"{e(trace)}</pre></details>"
            )
    body += f"<h2>Steps ({r.steps_total or 0})</h2>" + timeline(list(r.steps or []), now)
    events = [
        f'<tr data-testid="event" data-kind="{e(ev.kind)}"><td>{e(when(ev.at))}</td>'
        f"<td>{e(ev.kind)}</td><td>{e(ev.actor or '')}</td>"
        f"<td><code>{as_json(ev.data) if ev.data else ''}</code></td></tr>"
        for ev in r.events or []
    ]
    body += f"<h2>Events ({r.events_total or 0})</h2>" + table(
        ["at", "kind", "actor", "data"], events
    )
    body += f'<h2>Input</h2><pre data-testid="job-input">{as_json(job.input)}</pre>'
    if job.output is not None:
        body += f"<h2>Output</h2><pre>{as_json(job.output)}</pre>"
    return dash.frame(f"Job {job.id}", body, flash=flash_of(request))
