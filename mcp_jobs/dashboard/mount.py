"""The dashboard inside `serve --transport http`: requests under `/dashboard` go to it (behind the
server's token, by header or the `?token=` cookie; an OAuth token held to its grants as on
`/mcp`), everything else to the MCP app. The dashboard's sampler runs for as long as the MCP
app's lifespan does."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_jobs.config import Settings
from mcp_jobs.dashboard.app import Dashboard
from mcp_jobs.dashboard.auth import mounted_auth
from mcp_jobs.dashboard.routing import dashboard_routes_app

if TYPE_CHECKING:
    from engine.client import Jobs

MOUNT_PREFIX = "/dashboard"


class WithDashboard:
    """ASGI: the MCP app with the dashboard beside it at `MOUNT_PREFIX`."""

    def __init__(self, mcp_app: ASGIApp, settings: Settings, jobs: Jobs) -> None:
        # Under OAuth the token (header or cookie) is checked per request: its tenant claim
        # pins each page and its scopes gate each action, as they do each MCP call.
        self.dashboard = Dashboard(
            settings=settings, prefix=MOUNT_PREFIX, read_only=settings.read_only, client=jobs
        )
        self.pages = dashboard_routes_app(self.dashboard, mounted_auth(settings))
        self.mcp_app = mcp_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            async with self.dashboard.running():
                await self.mcp_app(scope, receive, send)
            return
        route = scope.get("path", "")
        if route == MOUNT_PREFIX or route.startswith(MOUNT_PREFIX + "/"):
            await self.pages(scope, receive, send)
        else:
            await self.mcp_app(scope, receive, send)


def mounted_beside(settings: Settings, jobs: Jobs) -> Callable[[ASGIApp], ASGIApp]:
    """What `serve_http` wraps the MCP app with to serve the dashboard beside it."""
    return lambda mcp_app: WithDashboard(mcp_app, settings, jobs)
