"""Streamable HTTP: loopback by default, and a bearer token on every request.

A request without the token (or with a wrong one) is answered 401 by the SDK's auth middleware
before it reaches a session, so it touches nothing: no database call, no event. Each refusal is
logged with the remote address, the path and why (never any part of the token).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import shlex

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_jobs.config import TOKEN_ENV, Settings
from mcp_jobs.errors import TokenRequiredError, TokenTooShortError

TOKEN_CLIENT_ID = "mcp-jobs-token"
# Beyond loopback anyone who can reach the port can guess: 32 characters is what
# `openssl rand -hex 16` gives, the least that makes guessing hopeless.
MIN_EXPOSED_TOKEN_LENGTH = 32

logger = logging.getLogger("mcp_jobs.server.http")


class StaticTokenVerifier:
    """Accepts exactly one shared secret (`MCP_JOBS_TOKEN`), compared in constant time."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token=token, client_id=TOKEN_CLIENT_ID, scopes=[])
        return None


def auth_settings(host: str, port: int) -> AuthSettings:
    """Resource-server-only settings: the token is checked here; no OAuth endpoints are served."""
    shown = f"[{host}]" if ":" in host else host
    return AuthSettings(issuer_url=f"http://{shown}:{port}", resource_server_url=None)


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only. A name other
    than `localhost` counts as exposed: what it resolves to is not ours to trust."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def require_token(settings: Settings) -> str:
    """The token HTTP serves with: always required, and at least 32 characters once the server
    listens beyond loopback."""
    token = settings.token
    if not token:
        raise TokenRequiredError()
    if not is_loopback(settings.host) and len(token) < MIN_EXPOSED_TOKEN_LENGTH:
        if settings.token_source == TOKEN_ENV:
            fix = f"export {TOKEN_ENV}=$(openssl rand -hex 32)"
        else:
            fix = f"(umask 077 && openssl rand -hex 32 > {shlex.quote(settings.token_source)})"
        raise TokenTooShortError(settings.host, len(token), MIN_EXPOSED_TOKEN_LENGTH, fix)
    return token


def refusal_reason(authorization: str | None) -> str:
    """Why a request got 401, from its Authorization header alone (the header is not logged)."""
    if authorization is None or not authorization.strip():
        return "missing"
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return "malformed"
    return "wrong"


class LogRefusedRequests:
    """ASGI middleware around the MCP app: a 401 answer is logged as a warning naming the
    remote address, the method and path, and whether the token was missing, malformed or wrong."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                _log_refusal(scope)
            await send(message)

        await self.app(scope, receive, watch)


def _log_refusal(scope: Scope) -> None:
    headers = [value for key, value in scope.get("headers", ()) if key.lower() == b"authorization"]
    reason = refusal_reason(headers[0].decode("latin-1") if headers else None)
    client = scope.get("client")
    remote = f"{client[0]}:{client[1]}" if client else "unknown"
    path = scope.get("path", "")
    logger.warning(
        "refused %s %s from %s: %s bearer token",
        scope.get("method", "?"),
        path,
        remote,
        reason,
        extra={"auth": {"remote": remote, "path": path, "reason": reason}},
    )
