"""Who may use an HTTP session, and how many one may hold: a session answers only the principal
that opened it (its token's client, issuer and subject, and its tenant claim), and a principal
keeps at most its share of `--max-sessions`.

The SDK's session manager binds a session to the client, issuer and subject, not the tenant:
one agent's tokens for two tenants were one principal to it, so either tenant's token could use,
listen on or end the other's session. `SessionGate` sits inside the manager, past the token check
and the body bound, in front of its session routing: a request naming a session another principal
opened is answered exactly as one naming no session at all (404; nothing says it exists).

A principal at its share makes room by closing its own oldest idle session, as its DELETE would:
a client that restarts without ending its session (most do) reuses its own room instead of being
locked out for the idle period, and no token can hold more than its share. Only when every one of
its sessions is busy (a call in flight, an open GET stream) is that principal refused, alone, 503.

The SDK keeps its sessions in a private table (`_server_instances`) and ends one with a private
method (`_discard_session`, which DELETE uses); tests/mcp/test_http_sessions.py fails if either
changes.
"""

from __future__ import annotations

import logging
import math

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import principal_components
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_jobs.config import MAX_SESSIONS_ENV, Settings
from mcp_jobs.server.http_answers import SERVER_BUSY, Refusal
from mcp_jobs.server.oauth_grants import OAuthAccessToken

logger = logging.getLogger("mcp_jobs.server.http")

# Who a token speaks for: (client id, issuer, subject, tenant); () with no token checked.
Principal = tuple[str | None, ...]

SESSION_HEADER = b"mcp-session-id"
# The SDK's answer to a session id it does not know, which ExplainRefusals then explains.
_UNKNOWN_SESSION = Refusal(404, "Session not found")


def session_share(settings: Settings) -> int:
    """The sessions one principal may hold open. With one static token there is one principal,
    which holds the whole bound; under OAuth a quarter of it (at least one), so that filling
    the bound takes four principals."""
    if settings.oauth is None:
        return settings.max_sessions
    return max(1, settings.max_sessions // 4)


def principal_of(scope: Scope) -> Principal:
    """The principal of the request `scope`, as its verified token names it."""
    user = scope.get("user")
    if not isinstance(user, AuthenticatedUser):
        return ()
    token = user.access_token
    tenant = token.tenant if isinstance(token, OAuthAccessToken) else None
    return (*principal_components(token), tenant)


class SessionGate:
    """The session manager's front door (see the module docstring)."""

    def __init__(
        self, app: ASGIApp, manager: StreamableHTTPSessionManager, settings: Settings
    ) -> None:
        self.app = app
        self.manager = manager
        self.settings = settings
        self.share = session_share(settings)
        self._owners: dict[str, Principal] = {}
        # Sessions being opened (admitted, not yet answered), by principal: they count too.
        self._opening: dict[Principal, int] = {}
        self._lock = anyio.Lock()

    @classmethod
    def install(cls, manager: StreamableHTTPSessionManager, settings: Settings) -> None:
        """Put a gate into `manager`, between its body bound and its session routing."""
        bounded = manager.asgi_app
        bounded.app = cls(bounded.app, manager, settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_sessions(scope):
            await self.app(scope, receive, send)
            return
        principal = principal_of(scope)
        session = _header(scope, SESSION_HEADER)
        if session is not None:
            owner = self._owners.get(session)
            if owner is not None and owner != principal:
                _log_foreign(scope)
                for part in _UNKNOWN_SESSION.answer():
                    await send(part)
                return
            await self.app(scope, receive, send)
        elif scope.get("method") == "POST":  # without a session id: it opens one
            await self._open(principal, scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _open(self, principal: Principal, scope: Scope, receive: Receive, send: Send) -> None:
        async with self._lock:
            room = await self._make_room(principal)
            if room:
                self._opening[principal] = self._opening.get(principal, 0) + 1
        if not room:
            for part in self._busy().answer():
                await send(part)
            return
        counted = True

        def done_opening() -> None:
            nonlocal counted
            if counted:
                counted = False
                left = self._opening[principal] - 1
                if left:
                    self._opening[principal] = left
                else:
                    del self._opening[principal]

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                opened = _header(message, SESSION_HEADER)
                if message["status"] < 400 and opened is not None:
                    self._owners[opened] = principal
                done_opening()
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            done_opening()

    async def _make_room(self, principal: Principal) -> bool:
        """Whether `principal` may open one more session, once its oldest idle one is closed
        when it holds its share."""
        live = self.manager._server_instances
        for ended in [s for s in self._owners if s not in live]:
            del self._owners[ended]
        held = [s for s, owner in self._owners.items() if owner == principal]
        if len(held) + self._opening.get(principal, 0) < self.share:
            return True
        idle = [(since, s) for s in held if (since := _idle_since(live[s])) is not None]
        if not idle:
            return False
        _, oldest = min(idle)
        del self._owners[oldest]
        await self.manager._discard_session(oldest, live[oldest])
        return True

    def _busy(self) -> Refusal:
        # By then every call in flight has ended: the longest is a wait at its cap.
        retry = max(1, math.ceil(self.settings.limits.max_wait_seconds))
        of = (
            f"its share of this server's {self.settings.max_sessions}"
            if self.share < self.settings.max_sessions
            else f"the most this server keeps open (--max-sessions, {MAX_SESSIONS_ENV})"
        )
        return Refusal(
            503,
            f"Too many open sessions for this token: it holds {self.share}, {of}, and each is "
            "serving a request now (a call, or an open GET stream); retry after "
            f"{retry} s, or end one it no longer uses (DELETE with its Mcp-Session-Id)",
            SERVER_BUSY,
            headers=((b"retry-after", b"%d" % retry),),
        )


def _idle_since(transport: StreamableHTTPServerTransport) -> float | None:
    """When the session went idle, as its idle deadline orders it; None while it is busy (the
    SDK holds the deadline at infinity while a request is in flight)."""
    scope = transport.idle_scope
    if scope is None:
        return None
    if scope.cancel_called:
        return -math.inf  # ending already: closing it now costs nothing
    return None if math.isinf(scope.deadline) else scope.deadline


def _has_sessions(scope: Scope) -> bool:
    """Whether the SDK routes the request to its sessions: a 2026-07-28 one has none."""
    version = _header(scope, b"mcp-protocol-version")
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


def _header(holder: Scope | Message, name: bytes) -> str | None:
    for key, value in holder.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _log_foreign(scope: Scope) -> None:
    client = scope.get("client")
    remote = f"{client[0]}:{client[1]}" if client else "unknown"
    logger.warning(
        "refused %s %s from %s: it names a session another principal opened",
        scope.get("method", "?"),
        scope.get("path", ""),
        remote,
    )
