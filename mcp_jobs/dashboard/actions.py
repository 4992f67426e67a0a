"""The page's actions — retry, cancel, pause, resume — only when the dashboard is not read-only.

Each is a GET that shows a confirmation form and a POST (from that form, with its CSRF token)
that acts. An action runs the very operation the MCP tool runs and is recorded by the same
`server.audit.record_call` with the tool's name and arguments, so the events table answers "who
did that" alike; the actor says where it came from (`dashboard:retry_job`, as the tool's is
`mcp:retry_job`). A POST whose token is missing or wrong is refused (403) before anything runs.

On an OAuth server an action needs what its tool needs of the request's token
(`oauth_grants.authorize`: `jobs:write`), and acts in the tenant its claim pins, where a pause or
resume (every tenant's work) is refused as the tool refuses it (TENANT_SCOPE_EXCEEDED).

A queue is named by the query (`/queues/pause?queue=NAME`), not a path segment: any queue name
(`mail/bulk`, `..`, one holding a newline) reaches the operation as it is.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

import anyio
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from engine.errors import InvalidArgumentError
from engine.pauses import target
from mcp_jobs.dashboard.app import FORBIDDEN, error_page
from mcp_jobs.dashboard.html import e, error_box, frame, link, notice_box, path
from mcp_jobs.dashboard.query import read_query
from mcp_jobs.errors import ScopeMissingError
from mcp_jobs.operations.envelope import error_payload, failure, success
from mcp_jobs.operations.jobs import cancel_job, retry_job
from mcp_jobs.operations.models import CancelJobResult, Envelope, RetryJobResult
from mcp_jobs.operations.pauses import pause_queue, resume_queue
from mcp_jobs.operations.scope import Scope
from mcp_jobs.server.audit import Subject, record_call
from mcp_jobs.server.oauth_grants import authorize

if TYPE_CHECKING:
    from mcp_jobs.dashboard.app import Dashboard, Page

logger = logging.getLogger(__name__)

PATHS = (
    "/jobs/{job_id}/retry",
    "/jobs/{job_id}/cancel",
    "/queues/pause",
    "/queues/resume",
)
CSRF_FIELD = "csrf"
# A confirmation form posts a token and a short reason: nothing bigger is read.
MAX_FORM_BYTES = 4096
# How long its body may take to arrive.
FORM_READ_S = 10

FLASHES = {
    "retry": "Retried: the job is queued again.",
    "cancel": "Cancelled.",
    "pause": "Paused: workers stop claiming this queue.",
    "resume": "Resumed: workers claim this queue again.",
}


def flash_of(request: Request) -> str | None:
    """The fixed message an action's redirect names (never text from the URL itself)."""
    return FLASHES.get(request.query_params.get("flash", ""))


def refuser(route: str) -> Page:
    """A read-only dashboard's answer on `route`: 403, its fix the CLI line that does the same
    (the CLI writes what the dashboard here may not)."""
    action = ACTIONS[route.rsplit("/", 1)[1]]

    async def page(dash: Dashboard, request: Request) -> Response:
        params = _params(dash, action, request, route.strip("/"))
        refused = InvalidArgumentError(
            "read_only",
            True,
            f"false to {action.verb} from the dashboard: it was started with --read-only and "
            "changes nothing (the fix does the same from the CLI)",
            fix=dash.scope().fixes.command(*action.cli(params)),
        )
        return error_page(dash, refused, f"dashboard {request.url.path}", status=403)

    return page


def _job_of(model: RetryJobResult | CancelJobResult) -> Subject:
    return (model.job.id, model.job.tenant_id) if model.job is not None else (None, None)


@dataclass(frozen=True)
class Action:
    """One action: the tool it stands for, what the form asks, and how it runs."""

    verb: str
    tool: str
    # Where it is asked and posted, from its arguments (each encoded: any name gets there).
    url: Callable[[str, Mapping[str, str]], str]
    question: Callable[[dict[str, str]], str]
    extra_fields: str
    run: Callable[[Scope, dict[str, str], dict[str, str]], Awaitable[Envelope]]
    audit: Callable[[dict[str, str], dict[str, str]], dict[str, Any]]
    subject: Callable[[Any], Subject] | None
    back: Callable[[str, dict[str, str]], str]
    # The arguments the query names (the others are the path's), checked before it is asked.
    query: tuple[str, ...] = ()
    check: Callable[[dict[str, str]], object] | None = None
    # Refused in a tenant-pinned scope (TENANT_SCOPE_EXCEEDED): a pause holds every tenant.
    across_tenants: bool = False
    # The CLI's words for the same action (a read-only dashboard's fix).
    cli: Callable[[dict[str, str]], tuple[str, ...]] = lambda p: ("--help",)


def _checked(form: dict[str, str], name: str) -> bool:
    return form.get(name) in ("1", "on", "true")


ACTIONS = {
    "retry": Action(
        verb="retry",
        tool="retry_job",
        url=lambda prefix, p: path(prefix, "jobs", p["job_id"], "retry"),
        question=lambda p: (
            f"Retry job {p['job_id']}? A failed or dead job is queued again with its attempts "
            "reset, a delayed one runs now with its attempts kept; completed steps are kept."
        ),
        extra_fields='<label><input type="checkbox" name="include_cancelled" value="1"> '
        "also when it was cancelled</label>",
        run=lambda s, p, f: retry_job(s, p["job_id"], _checked(f, "include_cancelled")),
        audit=lambda p, f: {
            "job_id": p["job_id"],
            "include_cancelled": _checked(f, "include_cancelled"),
            "from_step": None,
        },
        subject=_job_of,
        back=lambda prefix, p: path(prefix, "jobs", p["job_id"]),
        cli=lambda p: ("jobs", "retry", p["job_id"]),
    ),
    "cancel": Action(
        verb="cancel",
        tool="cancel_job",
        url=lambda prefix, p: path(prefix, "jobs", p["job_id"], "cancel"),
        question=lambda p: f"Cancel job {p['job_id']}? A running job is told to stop.",
        extra_fields="",
        run=lambda s, p, f: cancel_job(s, p["job_id"]),
        audit=lambda p, f: {"job_id": p["job_id"]},
        subject=_job_of,
        back=lambda prefix, p: path(prefix, "jobs", p["job_id"]),
        cli=lambda p: ("jobs", "cancel", p["job_id"]),
    ),
    "pause": Action(
        verb="pause",
        tool="pause_queue",
        url=lambda prefix, p: path(prefix, "queues", "pause", query={"queue": p["queue"]}),
        question=lambda p: (
            f"Pause queue {p['queue']}? Workers stop claiming its jobs until it "
            "is resumed; running jobs finish."
        ),
        extra_fields='<label>reason <input name="reason" maxlength="200"></label>',
        run=lambda s, p, f: pause_queue(s, p["queue"], None, f.get("reason") or None),
        audit=lambda p, f: {"queue": p["queue"], "job": None, "reason": f.get("reason") or None},
        subject=None,
        back=lambda prefix, p: prefix + "/",
        query=("queue",),
        check=lambda p: target(p["queue"], None),
        across_tenants=True,
        cli=lambda p: ("queues", "pause", p["queue"]),
    ),
    "resume": Action(
        verb="resume",
        tool="resume_queue",
        url=lambda prefix, p: path(prefix, "queues", "resume", query={"queue": p["queue"]}),
        question=lambda p: f"Resume queue {p['queue']}? Workers claim its jobs again.",
        extra_fields="",
        run=lambda s, p, f: resume_queue(s, p["queue"], None),
        audit=lambda p, f: {"queue": p["queue"], "job": None},
        subject=None,
        back=lambda prefix, p: prefix + "/",
        query=("queue",),
        check=lambda p: target(p["queue"], None),
        across_tenants=True,
        cli=lambda p: ("queues", "resume", p["queue"]),
    ),
}


async def perform(
    dash: Dashboard, action: Action, params: dict[str, str], form: dict[str, str]
) -> dict[str, Any]:
    """Run the action as its tool does (`server.calls.run_tool`): the operation, the envelope,
    then the audit event whether it succeeded or was refused."""
    scope = dash.scope(action.tool)
    acted_on: Subject = (None, None)
    try:
        authorize(scope.settings, action.tool, mutating=True)  # OAuth scopes, as the tool's
        model = await action.run(scope, params, form)
        envelope = success(scope.fixes.qualify_all(model))
        if action.subject is not None:
            acted_on = action.subject(model)
    except Exception as exc:  # the envelope carries the failure; cancellation still propagates
        envelope = failure(
            error_payload(exc, where=f"dashboard {action.tool}", context=scope.fixes)
        )
    await record_call(scope, action.tool, envelope, acted_on, action.audit(params, form))
    return envelope


class _Unread(Exception):
    """The form was not read: the answer the client gets, if it is still there."""

    def __init__(self, status: int, value: str, expected: str) -> None:
        self.status = status
        self.value = value
        self.expected = expected


_SMALL = f"at most {MAX_FORM_BYTES} bytes: a confirmation form's token and a short reason"


async def _form(request: Request) -> dict[str, str]:
    """The posted form, refused when it is larger than a confirmation form. A body declared too
    large is refused before a byte is read, and the read is bounded in time: a client that
    stalls or goes away is answered (or left) without an unexpected failure."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        raise _Unread(413, f"{declared} bytes", _SMALL)
    body = b""
    try:
        with anyio.fail_after(FORM_READ_S):
            async for chunk in request.stream():
                body += chunk
                if len(body) > MAX_FORM_BYTES:
                    raise _Unread(413, f"over {MAX_FORM_BYTES} bytes", _SMALL)
    except TimeoutError:
        raise _Unread(408, "unfinished", f"sent within {FORM_READ_S} s") from None
    except ClientDisconnect:
        raise _Unread(400, "cut off", "sent whole (the client went away)") from None
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def offered(dash: Dashboard, verb: str) -> bool:
    """Whether this request is offered `verb`: the dashboard is not read-only, the request's
    token holds the tool's write scope, and its tenant pin does not refuse it (a link that can
    only fail is not shown)."""
    if dash.read_only:
        return False
    action = ACTIONS[verb]
    settings = dash.request_settings()
    if action.across_tenants and settings.tenant is not None:
        return False
    try:
        authorize(settings, action.tool, mutating=True)
    except ScopeMissingError:
        return False
    return True


def action_url(dash: Dashboard, verb: str, params: Mapping[str, str]) -> str:
    """The link to `verb`'s confirmation form for `params` (`{"queue": ...}`, `{"job_id": ...}`)."""
    return ACTIONS[verb].url(dash.prefix, params)


def handler(route: str) -> Page:
    action = ACTIONS[route.rsplit("/", 1)[1]]
    page_name = route.strip("/")

    async def page(dash: Dashboard, request: Request) -> str | Response:
        params = _params(dash, action, request, page_name)
        # The token is bound to this action on these arguments, however the URL was spelt.
        here = action.url(dash.prefix, params)
        where = f"dashboard {request.url.path}"
        if request.method == "GET":
            # No form for a write the token cannot make (SCOPE_MISSING, as the tool answers).
            authorize(dash.request_settings(), action.tool, mutating=True)
            return _confirm(dash, action, params, here)
        try:
            form = await _form(request)
        except _Unread as unread:
            logger.info("dashboard %s: form not read (%s)", here, unread.value)
            # Its fix is the confirmation form, which posts what is read.
            refused = InvalidArgumentError("form", unread.value, unread.expected, fix=here)
            return error_page(dash, refused, where, status=unread.status)
        token = form.get(CSRF_FIELD)
        if token is None or not hmac.compare_digest(token.encode(), dash.csrf(here).encode()):
            refused = InvalidArgumentError(
                CSRF_FIELD,
                "(missing)" if token is None else "(not this form's)",
                "the token of the confirmation form at this URL, from this run of the "
                "dashboard: open it again and confirm",
                fix=here,
            )
            return error_page(dash, refused, where, status=403)
        envelope = await perform(dash, action, params, form)
        if not envelope["ok"]:
            body = error_box(envelope["error"])
            forbidden = envelope["error"]["code"] in FORBIDDEN
            return HTMLResponse(
                frame(f"{action.verb} refused", body, prefix=dash.prefix, read_only=False),
                status_code=403 if forbidden else 409,
            )
        target_url = action.back(dash.prefix, params)
        if envelope.get("notices"):
            # Done, with a warning a redirect cannot carry (a pause of a name nothing uses).
            body = "".join(notice_box(n) for n in envelope["notices"])
            body += f"<p>{link(target_url, 'back')}</p>"
            return frame(
                f"{action.verb} done",
                body,
                prefix=dash.prefix,
                flash=FLASHES[action.verb],
                read_only=False,
            )
        return RedirectResponse(f"{target_url}?flash={action.verb}", status_code=303)

    return page


def _params(dash: Dashboard, action: Action, request: Request, page: str) -> dict[str, str]:
    """The action's arguments: its path's, and its query's (a name it does not take refused)."""
    params = {k: str(v) for k, v in request.path_params.items()}
    # Its query's refusal names this URL (`jobs/ID/retry`) as the one to open instead.
    params.update(read_query(request, dash.prefix, page.format_map(params), action.query))
    if action.check is not None:
        action.check(params)  # a name the operation would refuse is refused before it asks
    return params


def _confirm(dash: Dashboard, action: Action, params: dict[str, str], here: str) -> str:
    body = (
        f'<form method="post" action="{e(here)}"><p>{e(action.question(params))}</p>'
        f'<input type="hidden" name="{CSRF_FIELD}" value="{e(dash.csrf(here))}">'
        f"<p>{action.extra_fields}</p>"
        f'<button type="submit" data-testid="confirm">{e(action.verb)}</button> '
        f'<a href="{e(action.back(dash.prefix, params))}">back</a></form>'
    )
    return frame(f"Confirm {action.verb}", body, prefix=dash.prefix, read_only=False)
