"""Who may read the dashboard: the HTTP server's token rules, for a browser.

Standalone on a loopback address no token is asked (like the worker's metrics port), but the
Host header must name this machine, so a web page that rebinds its own name to 127.0.0.1 cannot
read it. Beyond loopback, and always when mounted in the HTTP MCP server, every request carries
the token: once as `?token=` (which sets an HttpOnly SameSite=Strict cookie and redirects to
the clean URL, so the token leaves the address bar and history), then by cookie, or as
`Authorization: Bearer`. A missing or wrong token is answered 401 before anything is read.

Mounted on an OAuth server, a request is served as its token's, as an MCP request is: the token
is put in the SDK's auth context, where `oauth_grants` reads its tenant claim and scopes, and a
token without `jobs:read` is answered 403 `insufficient_scope`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, quote, urlencode

from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_jobs.config import Settings
from mcp_jobs.dashboard.html import error_box, frame
from mcp_jobs.errors import ScopeMissingError
from mcp_jobs.operations.envelope import error_payload
from mcp_jobs.server.http import StaticTokenVerifier, is_loopback, require_token
from mcp_jobs.server.http_hosts import HOST_REFUSED, HOST_REFUSED_TITLE
from mcp_jobs.server.oauth_grants import authorize
from mcp_jobs.server.token_refusals import TOKEN_REFUSED, TOKEN_REFUSED_TITLE
from schemas.errors import ErrorPayload

logger = logging.getLogger("mcp_jobs.dashboard")

COOKIE = "mcp_jobs_dashboard"
TOKEN_PARAM = "token"

# What a presented token grants (None: it is refused).
Verifier = Callable[[str], Awaitable[AccessToken | None]]


def static_verifier(token: str) -> Verifier:
    """Accepts exactly `token`, as the HTTP server's static bearer does."""
    return StaticTokenVerifier(token).verify_token


@dataclass(frozen=True)
class DashboardAuth:
    """`verify` None: no token asked. `hosts`: the Host names accepted (None: any).
    `served`: the server's settings when mounted, whose OAuth rules hold a token here too."""

    verify: Verifier | None
    hosts: frozenset[str] | None = None
    served: Settings | None = None


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def standalone_auth(settings: Settings) -> DashboardAuth:
    """`mcp-jobs dashboard`: none on loopback (Host checked), the token rule beyond it
    (TOKEN_REQUIRED, TOKEN_TOO_SHORT, as `serve --transport http`)."""
    if is_loopback(settings.host):
        return DashboardAuth(
            None, LOOPBACK_NAMES | {settings.host.lower(), *settings.allowed_hosts}
        )
    return DashboardAuth(static_verifier(require_token(settings)))


def mounted_auth(settings: Settings) -> DashboardAuth:
    """Inside `serve --transport http`: the server's own verifier (static token or OAuth), and
    its settings, so an OAuth token is held to its grants (`oauth_grants`)."""
    if settings.oauth is not None:
        from mcp_jobs.server.http import http_auth

        verifier = http_auth(settings)["token_verifier"]
        return DashboardAuth(verifier.verify_token, served=settings)
    return DashboardAuth(static_verifier(require_token(settings)), served=settings)


def _refusal(status: int, why: str) -> ErrorPayload:
    """What the gate refused, under the codes `/mcp` answers the same refusals with (a token,
    a Host); never the token presented."""
    if status == 403:  # the Host header
        return ErrorPayload(
            code=HOST_REFUSED,
            title=HOST_REFUSED_TITLE,
            cause=why,
            fix="open it by a name of this machine (localhost, 127.0.0.1, [::1]) or one the "
            "dashboard was started with (--allowed-host NAME)",
            retryable=False,
        )
    return ErrorPayload(
        code=TOKEN_REFUSED,
        title=TOKEN_REFUSED_TITLE,
        cause=why,
        fix="open the dashboard's URL once with ?token= and the server's token (a cookie keeps "
        "it), or send Authorization: Bearer and the token",
        retryable=False,
    )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[: host.find("]") + 1].lower()
    return host.rsplit(":", 1)[0].lower() if host.count(":") == 1 else host.lower()


class AuthGate:
    """ASGI middleware in front of every dashboard route (see the module docstring)."""

    def __init__(self, app: ASGIApp, auth: DashboardAuth, prefix: str) -> None:
        self.app = app
        self.auth = auth
        self.prefix = prefix  # where the dashboard is mounted ("" standalone)
        self.cookie_path = prefix + "/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hosts = self.auth.hosts
        if hosts is not None and _host_name(_header(scope, b"host") or "") not in hosts:
            await self._refuse(scope, send, 403, "host not allowed", "unexpected Host header")
            return
        verify = self.auth.verify
        if verify is None:
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [v for k, v in query if k == TOKEN_PARAM]
        if given:
            if await verify(given[0]) is None:
                await self._refuse(scope, send, 401, "wrong token", "wrong ?token=")
                return
            await self._set_cookie(scope, send, given[0], query)
            return
        token, how = self._presented(scope)
        if token is None:
            await self._refuse(scope, send, 401, "token required", "missing token")
            return
        granted = await verify(token)
        if granted is None:
            await self._refuse(scope, send, 401, "wrong token", f"wrong {how}")
            return
        # Where `oauth_grants` reads an MCP request's token: the pages' Scope and the actions'
        # scope checks read this one's the same way.
        entered = auth_context_var.set(AuthenticatedUser(granted))
        try:
            if self.auth.served is not None:
                try:
                    authorize(self.auth.served, "dashboard", mutating=False)
                except ScopeMissingError as missing:
                    await self._insufficient(scope, send, missing)
                    return
            await self.app(scope, receive, send)
        finally:
            auth_context_var.reset(entered)

    def _presented(self, scope: Scope) -> tuple[str | None, str]:
        authorization = _header(scope, b"authorization")
        if authorization:
            kind, _, credentials = authorization.partition(" ")
            return (credentials.strip() if kind.lower() == "bearer" else ""), "bearer token"
        cookie = SimpleCookie()
        try:
            cookie.load(_header(scope, b"cookie") or "")
        except Exception:  # a malformed Cookie header is no token
            return None, "cookie"
        morsel = cookie.get(COOKIE)
        return (morsel.value if morsel is not None else None), "cookie"

    async def _set_cookie(
        self, scope: Scope, send: Send, token: str, query: list[tuple[str, str]]
    ) -> None:
        rest = urlencode([(k, v) for k, v in query if k != TOKEN_PARAM])
        here = quote(scope.get("root_path", "") + scope["path"], safe="/")
        # One leading slash: a browser reads `//evil.example/x` as another site (`\` is quoted).
        target = "/" + here.lstrip("/") + (f"?{rest}" if rest else "")
        cookie = SimpleCookie()
        cookie[COOKIE] = token
        cookie[COOKIE]["httponly"] = True
        cookie[COOKIE]["samesite"] = "Strict"
        cookie[COOKIE]["path"] = self.cookie_path
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", target.encode("latin-1")),
                    (b"set-cookie", cookie[COOKIE].OutputString().encode("latin-1")),
                    (b"cache-control", b"no-store"),
                    (b"content-length", b"0"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    async def _insufficient(self, scope: Scope, send: Send, missing: ScopeMissingError) -> None:
        """403 for a token that may read nothing here, as `/mcp` answers it (RFC 6750)."""
        needed = (missing.details or {}).get("needed")
        logger.warning("dashboard refused %s: the token lacks %s", scope.get("path"), needed)
        where = f"dashboard {scope.get('path')}"
        body = frame(
            "insufficient scope",
            error_box(error_payload(missing, where=where).model_dump()),
            prefix=self.prefix,
        ).encode()
        challenge = (
            f'Bearer realm="mcp-jobs dashboard", error="insufficient_scope", scope="{needed}"'
        )
        headers = [
            (b"content-type", b"text/html; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", challenge.encode("latin-1")),
        ]
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _refuse(self, scope: Scope, send: Send, status: int, title: str, why: str) -> None:
        client = scope.get("client")
        remote = f"{client[0]}:{client[1]}" if client else "unknown"
        logger.warning("dashboard refused %s from %s: %s", scope.get("path"), remote, why)
        body = frame(
            title,
            error_box(_refusal(status, why).model_dump()),
            prefix=self.prefix,
        ).encode()
        headers = [
            (b"content-type", b"text/html; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
        ]
        if status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="mcp-jobs dashboard"'))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
