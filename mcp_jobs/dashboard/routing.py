"""The dashboard's routes and its ASGI app: each page and action behind one deadline, a failure
shown as its code, cause and fix (`app.error_page`), the whole behind the auth gate."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from engine.errors import InvalidArgumentError
from mcp_jobs.config import Settings
from mcp_jobs.dashboard import actions
from mcp_jobs.dashboard.app import Dashboard, Page, error_page
from mcp_jobs.dashboard.auth import AuthGate, DashboardAuth, standalone_auth
from mcp_jobs.dashboard.headers import Guarded
from mcp_jobs.dashboard.mend import mended
from mcp_jobs.dashboard.pages import backfills, dead, job, jobs, overview, workers
from mcp_jobs.dashboard.sampler import DEFAULT_INTERVAL_MS, Sampler

if TYPE_CHECKING:
    from engine.backfill import BackfillRegistry
    from engine.client import Jobs
    from engine.clock import Clock


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
            return error_page(dash, mended(exc, request, dash.prefix), where)
        if deadline.cancelled_caught or shown is None:
            return error_page(dash, dash.unanswered(), where)
        if isinstance(shown, Response):
            return shown
        return HTMLResponse(shown, headers={"cache-control": "no-store"})

    return endpoint


def routes(dash: Dashboard) -> list[Route]:
    """Every route under `dash.prefix`; the action routes only when not read-only."""

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
            _page(dash, actions.refuser(path) if dash.read_only else actions.handler(path)),
            methods=["GET", "POST"],
        )
        for path in actions.PATHS
    )
    return found


def _unrouted(dash: Dashboard) -> Callable[[Request, Exception], Awaitable[Response]]:
    """A path no page has (404) or a method it does not take (405), shown as every refusal is:
    its code, cause and fix (the overview), not Starlette's bare text."""

    async def handler(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        pages = ", ".join(r.path for r in routes(dash) if isinstance(r, Route))
        refused = InvalidArgumentError(
            "path" if status == 404 else "method",
            request.url.path if status == 404 else request.method,
            f"one of the dashboard's: {pages}"
            if status == 404
            else "GET (a page) or, for an action, a POST from its confirmation form",
            fix=dash.prefix + "/",
        )
        page = error_page(dash, refused, f"dashboard {request.url.path}", status=status)
        if isinstance(exc, HTTPException) and exc.headers:
            page.headers.update(exc.headers)  # a 405's Allow
        return page

    return handler


def dashboard_routes_app(dash: Dashboard, auth: DashboardAuth) -> ASGIApp:
    """The routes behind the auth gate, with the sampler in the app's lifespan; every answer
    (the gate's refusals too) with the headers no other site may frame it by."""

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with dash.running():
            yield

    app = Starlette(
        routes=routes(dash),
        lifespan=lifespan,
        exception_handlers={HTTPException: _unrouted(dash)},
    )
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
