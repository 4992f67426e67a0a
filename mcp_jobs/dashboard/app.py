"""The dashboard's ASGI app: its routes over `mcp_jobs.operations`, and what they share.

Build it with `dashboard_app(settings, jobs=..., prefix=...)`:

- `settings`: the usual `Settings` (database URL, tenant pin, `read_only`, host for auth);
- `jobs`: a `Jobs` client to borrow (tests, the HTTP server); None opens one on
  `settings.url` for the app's lifespan;
- `prefix`: where it is mounted ("" standalone, "/dashboard" inside `serve --transport http`);
- `auth`: a `DashboardAuth` (default: `standalone_auth(settings)`, no token on loopback);
- `clock`, `sample_interval_ms`: the sampler's clock and period (tests inject a ManualClock).

A page's reads share one deadline (`read_deadline_ms`): a database that accepts and never answers
gets a 503 saying that figure, not a wait of one driver bound per read in turn.

The sampler runs in the app's lifespan; `Dashboard.running()` is that lifespan for a host app
that mounts the routes itself (`mount.py`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from engine.clock import Clock
from engine.drivers.urls import report_fix
from engine.errors import DriverUnavailableError, InvalidArgumentError, JobsError
from engine.shell_words import shell_join
from mcp_jobs.config import Settings
from mcp_jobs.dashboard.auth import AuthGate, DashboardAuth, standalone_auth
from mcp_jobs.dashboard.headers import Guarded
from mcp_jobs.dashboard.html import error_box, frame
from mcp_jobs.dashboard.sampler import DEFAULT_INTERVAL_MS, Sampler
from mcp_jobs.fix_context import FixContext, written_by_face
from mcp_jobs.operations.envelope import error_payload
from mcp_jobs.operations.models import QueueStatsView
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.stats import queue_stats
from mcp_jobs.operations.throughput import settled_counts
from mcp_jobs.server.oauth_grants import request_settings
from schemas.stats import SettledCount

if TYPE_CHECKING:
    from engine.backfill import BackfillRegistry
    from engine.client import Jobs

# The default page deadline: the PostgreSQL driver's own retry deadline (README "Outages"), so a
# page and the CLI give up after about as long.
READ_DEADLINE_MS = 10_000

Page = Callable[["Dashboard", Request], Awaitable[str | Response]]


@dataclass
class Dashboard:
    """What every page reads: the jobs client, the settings, the sampler, the mode."""

    settings: Settings
    prefix: str = ""
    read_only: bool = True
    client: Jobs | None = None
    clock: Clock | None = None
    sampler: Sampler = field(default_factory=Sampler)
    backfills: BackfillRegistry | None = None
    # How long a page waits for all of its reads together (`unanswered`).
    read_deadline_ms: int = READ_DEADLINE_MS
    # Signs the actions' CSRF tokens: per process, so a restart voids old forms.
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    @property
    def jobs(self) -> Jobs:
        if self.client is None:
            raise RuntimeError("the dashboard is not running (its lifespan has not started)")
        return self.client

    def request_settings(self) -> Settings:
        """The settings this request acts in: pinned to its OAuth token's tenant claim, as an MCP
        request's are (`oauth_grants.request_settings`; the server's own outside a request)."""
        return request_settings(self.settings)

    def sampled_for_request(self) -> bool:
        """Whether the sampler's series, read in the server's own scope, are this request's to
        see: not when its token pins it to one tenant of a server that serves every tenant."""
        return self.request_settings().tenant == self.settings.tenant

    def scope(self, tool: str = "dashboard") -> Scope:
        """A read (or an action named `tool`), acted as `dashboard:<tool>`; fixes are commands."""
        return Scope(
            jobs=self.jobs,
            settings=self.request_settings(),
            tool=tool,
            actor=f"dashboard:{tool}" if tool != "dashboard" else "dashboard",
            backfill_registry=self.backfills,
            face="cli",
        )

    def frame(self, title: str, body: str, **shown: Any) -> str:
        """`html.frame` for this dashboard and request: its prefix, mode and tenant pin."""
        pinned = self.request_settings().tenant is not None
        return frame(
            title, body, prefix=self.prefix, read_only=self.read_only, pinned=pinned, **shown
        )

    def csrf(self, path: str) -> str:
        """The token a form posting to `path` carries: bound to the path, signed per process."""
        return hmac.new(self.secret, path.encode(), hashlib.sha256).hexdigest()

    def unanswered(self) -> DriverUnavailableError:
        """What a page says when its reads did not all answer within `read_deadline_ms`."""
        return DriverUnavailableError(
            self.jobs.driver.kind,
            f"the database did not answer this page's reads within "
            f"{self.read_deadline_ms / 1000:.1f} s (the dashboard's bound for one page)",
            report_fix(self.settings.url),
        )

    async def read_queues(self) -> list[QueueStatsView]:
        """What the sampler reads each time: `queue_stats` in this dashboard's scope."""
        return (await queue_stats(self.scope())).queues or []

    async def count_settled(self, since_ms: int, until_ms: int) -> dict[str, SettledCount] | None:
        """The sampler's exact throughput (None: the driver cannot count, it estimates)."""
        return await settled_counts(self.scope(), since_ms, until_ms)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Dashboard]:
        """Open the client when none was lent, and sample `queue_stats` until closed."""
        opened = None
        if self.client is None:
            from engine.client import connect

            opened = self.client = await connect(self.settings.url)
        written_by_face(self.jobs)  # its fix lines get the dashboard's context (FixContext)
        clock = self.clock or self.jobs.clock
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.sampler.run, self.read_queues, clock, self.count_settled)
                yield self
                tg.cancel_scope.cancel()
        finally:
            if opened is not None:
                self.client = None
                with anyio.CancelScope(shield=True):
                    await opened.close()


NOT_FOUND = {"JOB_NOT_FOUND", "QUEUE_UNKNOWN", "JOB_UNKNOWN", "BACKFILL_UNKNOWN"}
# Refusals of what the caller may not do, whatever it asks: its token's scopes, its tenant pin.
FORBIDDEN = {"SCOPE_MISSING", "TENANT_SCOPE_EXCEEDED"}
# A retryable failure (the database away, its disk full) is the server's, not the request's:
# 503, and when to ask again.
RETRY_AFTER_S = 5


# The command each page shows the same as: a refused value's fix when it only says what to pass.
_COMMAND_OF_PAGE = {"backfills": ("backfill",), "workers": ("jobs", "stats")}


def error_page(dash: Dashboard, exc: Exception, where: str) -> HTMLResponse:
    """A typed failure as a page with its code, cause and fix: 404 for what is not there, 403
    for what the caller may not do, 503 with Retry-After for a retryable one, 400 for the rest
    (500: not typed)."""
    fixes = _fixes(dash)
    if isinstance(exc, InvalidArgumentError) and exc.fix_said and fixes is not None:
        page = where.removeprefix("dashboard ").removeprefix(dash.prefix).strip("/").split("/")[0]
        exc = _with_fix(exc, fixes, page)
    payload = error_payload(exc, where=where, context=fixes)
    headers = {}
    again = None
    if payload.code in NOT_FOUND:
        status = 404
    elif payload.code in FORBIDDEN:
        status = 403
    elif isinstance(exc, JobsError) and payload.retryable:
        status, headers, again = 503, {"retry-after": str(RETRY_AFTER_S)}, RETRY_AFTER_S
    else:
        status = 400 if isinstance(exc, JobsError) else 500
    body = error_box(payload.model_dump())
    page = dash.frame("Error", body, retry_after_s=again)
    return HTMLResponse(page, status_code=status, headers=headers)


def _with_fix(exc: InvalidArgumentError, fixes: FixContext, page: str) -> InvalidArgumentError:
    """`exc` with a fix that runs: the command listing what its argument names, else the help
    of the command `page` shows the same as."""
    command = _COMMAND_OF_PAGE.get(page, ("jobs", "ls"))
    fix = fixes.listing(command[0], exc.argument) or shell_join(["mcp-jobs", *command, "--help"])
    return InvalidArgumentError(exc.argument, exc.value, exc.expected, fix=fix)


def _fixes(dash: Dashboard) -> FixContext | None:
    try:
        return dash.scope().fixes
    except RuntimeError:
        return None


def _page(dash: Dashboard, render: Page) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        where = f"dashboard {request.url.path}"
        # A page's reads share one deadline; an action's POST is not cut short mid-write.
        bound = dash.read_deadline_ms / 1000 if request.method in ("GET", "HEAD") else None
        shown: str | Response | None = None
        try:
            with anyio.move_on_after(bound) as deadline:
                shown = await render(dash, request)
        except Exception as exc:  # shown as code, cause and fix, not a traceback
            return error_page(dash, exc, where)
        if deadline.cancelled_caught or shown is None:
            return error_page(dash, dash.unanswered(), where)
        if isinstance(shown, Response):
            return shown
        return HTMLResponse(shown, headers={"cache-control": "no-store"})

    return endpoint


def routes(dash: Dashboard) -> list[Route]:
    """Every route under `dash.prefix`; the action routes only when not read-only."""
    from mcp_jobs.dashboard import actions
    from mcp_jobs.dashboard.pages import backfills, dead, job, jobs, overview, workers

    p = dash.prefix
    found = [
        Route(p + "/", _page(dash, overview.render), methods=["GET"]),
        Route(p + "/jobs", _page(dash, jobs.render), methods=["GET"]),
        Route(p + "/jobs/{job_id}", _page(dash, job.render), methods=["GET"]),
        Route(p + "/dead", _page(dash, dead.render), methods=["GET"]),
        Route(p + "/backfills", _page(dash, backfills.render), methods=["GET"]),
        Route(p + "/workers", _page(dash, workers.render), methods=["GET"]),
    ]
    if p:
        found.append(Route(p, lambda _: RedirectResponse(p + "/", 308)))
    found.extend(
        Route(
            p + path,
            _page(dash, actions.refuse if dash.read_only else actions.handler(path)),
            methods=["GET", "POST"],
        )
        for path in actions.PATHS
    )
    return found


def dashboard_routes_app(dash: Dashboard, auth: DashboardAuth) -> ASGIApp:
    """The routes behind the auth gate, with the sampler in the app's lifespan; every answer
    (the gate's refusals too) with the headers no other site may frame it by."""

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with dash.running():
            yield

    app = Starlette(routes=routes(dash), lifespan=lifespan)
    return Guarded(AuthGate(app, auth, prefix=dash.prefix))


def dashboard_app(
    settings: Settings,
    *,
    jobs: Jobs | None = None,
    prefix: str = "",
    auth: DashboardAuth | None = None,
    clock: Clock | None = None,
    sample_interval_ms: int = DEFAULT_INTERVAL_MS,
    backfills: BackfillRegistry | None = None,
) -> ASGIApp:
    """The dashboard as one ASGI app (see the module docstring); read-only when
    `settings.read_only`."""
    dash = Dashboard(
        settings=settings,
        prefix=prefix.rstrip("/"),
        read_only=settings.read_only,
        client=jobs,
        clock=clock,
        sampler=Sampler(sample_interval_ms),
        backfills=backfills,
    )
    return dashboard_routes_app(dash, auth if auth is not None else standalone_auth(settings))
