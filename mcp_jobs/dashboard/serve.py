"""Serving the dashboard on a bound socket with uvicorn, announcing the address once started."""

from __future__ import annotations

import socket
import sys
from typing import TYPE_CHECKING

import uvicorn

from mcp_jobs.config import Settings
from mcp_jobs.dashboard.auth import DashboardAuth
from mcp_jobs.dashboard.routing import dashboard_app
from mcp_jobs.server.http_header_bounds import H11_BUFFER_BYTES, HeaderBounds

if TYPE_CHECKING:
    from engine.client import Jobs


def address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


class Announcing(uvicorn.Server):
    """uvicorn, printing `dashboard at URL` on stderr once its startup (the app's lifespan, so
    the sampler too) is done: a script waiting for the line can use the URL at once."""

    def __init__(self, config: uvicorn.Config, url: str) -> None:
        super().__init__(config)
        self.url = url

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(f"dashboard at {self.url}", file=sys.stderr, flush=True)


async def serve_dashboard(
    settings: Settings, jobs: Jobs, auth: DashboardAuth, sock: socket.socket
) -> None:
    """Serve until uvicorn's own SIGINT/SIGTERM handling stops it."""
    config = uvicorn.Config(
        # The same bound on a request's headers as `serve` (a typed 431 past it).
        HeaderBounds(dashboard_app(settings, jobs=jobs, auth=auth)),
        log_config=None,  # our handlers (engine.logs) format uvicorn's records too
        log_level="warning",
        access_log=False,
        lifespan="on",
        h11_max_incomplete_event_size=H11_BUFFER_BYTES,
    )
    await Announcing(config, address(sock)).serve(sockets=[sock])
