"""Serving streamable HTTP: the ASGI app with its session bounds, the listening socket, and the
line that says where the server listens.

The socket is bound here rather than by uvicorn so a busy port is a typed error (uvicorn would
log and exit the process), and the start line is logged once the port accepts connections.
Session expiry and the session bound are the SDK's own (`StreamableHTTPSessionManager`'s
`session_idle_timeout` and `max_sessions`): an expired session's id answers 404, a session over
the bound is refused with 503 and a Retry-After (`http_refusals`). Who may use a session and how
many one principal may hold is `http_sessions`; which Host and Origin names a loopback server
answers, `http_hosts`; how much header a request may carry, `http_header_bounds`.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import uvicorn
from anyio.abc import TaskStatus
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from engine.ports import free_port
from mcp_jobs.config import DEFAULT_HOST, DEFAULT_PORT, Settings
from mcp_jobs.errors import HttpBindError
from mcp_jobs.server.http import AnswerInvalidIds, LogRefusedRequests, is_loopback
from mcp_jobs.server.http_header_bounds import H11_BUFFER_BYTES, HeaderBounds
from mcp_jobs.server.http_hosts import HostGuard
from mcp_jobs.server.http_refusals import ExplainRefusals
from mcp_jobs.server.http_sessions import SessionGate

logger = logging.getLogger("mcp_jobs.server.http")

MCP_PATH = "/mcp"
KEEP_ALIVE_S = 75
# HostGuard checks Host and Origin for every loopback bind; the SDK's own check is off.
_NO_SDK_GUARD = TransportSecuritySettings(enable_dns_rebinding_protection=False)
# The SDK logs each session's id at INFO (opened, ended, expired, refused): an id is the key to
# its session, not for every reader of the log.
_SESSION_ID_LOGGERS = ("mcp.server.streamable_http_manager", "mcp.server.streamable_http")


# What wraps the MCP app with an app of its own beside it (the dashboard: its package's
# `mounted_beside`, chosen by the command that serves, which stands above both).
Beside = Callable[[ASGIApp], ASGIApp]


def http_app(server: MCPServer[Any], settings: Settings, beside: Beside | None = None) -> ASGIApp:
    """The server's streamable HTTP app with the session bounds of `settings`, refusals logged
    and said with their fix, a request whose id is of the wrong type answered, and what `beside`
    puts beside it (the web dashboard at /dashboard/)."""
    limit = settings.limits.max_request_bytes
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=settings.host,
        max_request_body_size=limit,
        session_idle_timeout=settings.session_idle_seconds,
        max_sessions=settings.max_sessions,
        transport_security=_NO_SDK_GUARD,
    )
    SessionGate.install(server.session_manager, settings)
    app = HostGuard(ExplainRefusals(AnswerInvalidIds(app, limit), settings), settings)
    if settings.oauth is not None:
        from mcp_jobs.server.oauth import ProtectedResourceMetadataApp

        app = ProtectedResourceMetadataApp(app, settings.oauth)
    if beside is not None:
        app = beside(app)
    # Outermost: a head past the bound reaches no token check, session or dashboard.
    return HeaderBounds(LogRefusedRequests(app))


def quiet_session_ids() -> None:
    """Keep the SDK's session ids out of an INFO log, unless a level was chosen for its
    loggers."""
    for name in _SESSION_ID_LOGGERS:
        sdk = logging.getLogger(name)
        if sdk.level == logging.NOTSET:
            sdk.setLevel(logging.WARNING)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host:port` (port 0: any free port)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise _refused(host, port, exc, "--host", DEFAULT_HOST) from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):  # taken, or below 1024 unprivileged
            free = free_port(host)
            raise _refused(
                host, port, exc, "--port", DEFAULT_PORT if free is None else free
            ) from exc
        raise _refused(host, port, exc, "--host", DEFAULT_HOST) from exc
    return sock


def _refused(host: str, port: int, exc: OSError, flag: str, nearest: object) -> HttpBindError:
    # The CLI writes the command that failed with `flag` set to `nearest` (cli/mend.py).
    fix = f"mcp-jobs serve --transport http {flag} {nearest}"
    return HttpBindError(host, port, _reason(exc), fix, flag=flag, nearest=nearest)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def endpoint(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{MCP_PATH}"


def _token_line(settings: Settings) -> str:
    if settings.oauth is not None:
        return f"OAuth access token required, issued by {settings.oauth.issuer}"
    return f"bearer token required, from {settings.token_source}"


@dataclass(frozen=True)
class Listening:
    """What `serve_http` hands a task group that started it: where it listens, and a stop."""

    url: str
    server: uvicorn.Server

    def stop(self) -> None:
        self.server.should_exit = True


async def serve_http(
    server: MCPServer[Any],
    settings: Settings,
    *,
    beside: Beside | None = None,
    task_status: TaskStatus[Listening] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until uvicorn's own SIGINT/SIGTERM handling (or `Listening.stop`) stops it."""
    quiet_session_ids()
    sock = bind(settings.host, settings.port)
    try:
        if not is_loopback(settings.host):
            logger.warning(
                "listening on %s, beyond loopback: any host that can reach port %d can try the "
                "token, and plain HTTP carries it in clear; put a TLS proxy in front",
                settings.host,
                sock.getsockname()[1],
            )
        logger.info(
            "serving MCP at %s (%s; sessions idle %gs are closed; at most %d open)",
            endpoint(sock),
            _token_line(settings),
            settings.session_idle_seconds,
            settings.max_sessions,
        )
        config = uvicorn.Config(
            http_app(server, settings, beside),
            log_config=None,  # our handlers (engine.logs) format uvicorn's records too
            log_level="warning",
            access_log=False,
            lifespan="on",
            # Longer than a client's or a proxy's idle pool keeps a connection (undici 4 s, load
            # balancers 60 s): the server closing first races a request sent on that socket.
            timeout_keep_alive=KEEP_ALIVE_S,
            # A head that has not ended is held up to this much, then cut off with a 400.
            h11_max_incomplete_event_size=H11_BUFFER_BYTES,
        )
        running = uvicorn.Server(config)
        task_status.started(Listening(endpoint(sock), running))
        await running.serve(sockets=[sock])
    finally:
        sock.close()
