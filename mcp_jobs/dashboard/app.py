"""What the dashboard's pages share: the `Dashboard` (client, settings, sampler, mode) and how a
failure is shown (`error_page`). Its routes and ASGI app are `routing.py`'s.

Build it with `dashboard_app(settings, jobs=..., prefix=...)` (routing.py):

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
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from engine.clock import Clock
from engine.driver_errors import DriverUnavailableError
from engine.drivers.urls import report_fix
from engine.errors import InvalidArgumentError, JobsError
from engine.shell_words import shell_join
from mcp_jobs.config import Settings
from mcp_jobs.dashboard.html import error_box, frame
from mcp_jobs.dashboard.sampler import Sampler
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

# The default page deadline: past the PostgreSQL driver's 10 s of retries (README "Outages") and
# a NATS driver's first connect, so a database that refuses connections shows the driver's
# error, which says why, rather than only that the page ran out of time.
READ_DEADLINE_MS = 12_000

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


def error_page(
    dash: Dashboard, exc: Exception, where: str, status: int | None = None
) -> HTMLResponse:
    """A typed failure as a page with its code, cause and fix: 404 for what is not there, 403
    for what the caller may not do, 503 with Retry-After for a retryable one, 400 for the rest
    (500: not typed); `status` when the request's refusal has its own (413, a 403 token)."""
    fixes = _fixes(dash)
    if isinstance(exc, InvalidArgumentError) and exc.fix_said and fixes is not None:
        page = where.removeprefix("dashboard ").removeprefix(dash.prefix).strip("/").split("/")[0]
        exc = _with_fix(exc, fixes, page)
    payload = error_payload(exc, where=where, context=fixes)
    headers: dict[str, str] = {}
    again = None
    if isinstance(exc, JobsError) and payload.retryable:
        headers, again = {"retry-after": str(RETRY_AFTER_S)}, RETRY_AFTER_S
    if status is None:
        status = _status(exc, payload.code, again is not None)
    body = error_box(payload.model_dump())
    page = dash.frame("Error", body, retry_after_s=again)
    return HTMLResponse(page, status_code=status, headers=headers)


def _status(exc: Exception, code: str, retryable: bool) -> int:
    if code in NOT_FOUND:
        return 404
    if code in FORBIDDEN:
        return 403
    if retryable:
        return 503
    return 400 if isinstance(exc, JobsError) else 500


def _with_fix(exc: InvalidArgumentError, fixes: FixContext, page: str) -> InvalidArgumentError:
    """`exc` with a fix that runs: the command listing what its argument names, else the help
    of the command `page` shows the same as."""
    command = _COMMAND_OF_PAGE.get(page, ("jobs", "ls"))
    fix = fixes.listing(command[0], exc.argument) or shell_join(["mcp-jobs", *command, "--help"])
    return exc.mended(fix)


def _fixes(dash: Dashboard) -> FixContext | None:
    try:
        return dash.scope().fixes
    except RuntimeError:
        return None
