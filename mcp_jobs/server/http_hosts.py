"""Which Host and Origin names a loopback server answers, against DNS rebinding: a web page whose
owner points its name at 127.0.0.1 reaches the server through its visitor's browser, its requests
carrying that name as Host and the page as Origin. A server bound to any loopback address
(`http.is_loopback`) answers this machine's names (127.0.0.1, localhost, [::1] and the address it
is bound to) and the names `--allowed-host` adds, on any port and in any case (host names are
case-insensitive); any other Host is refused 421, any other Origin 403. A request without an
Origin is no cross-origin page's. A server bound beyond loopback is reached by names of its own:
it has no such guard.

This replaces the SDK's guard, which it enables for the exact strings "127.0.0.1", "localhost"
and "::1" only and compares case-sensitively.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from engine.errors import short_repr
from mcp_jobs.config import ALLOWED_HOSTS_ENV, Settings, read_allowed_hosts
from mcp_jobs.errors import HttpSettingInvalidError
from mcp_jobs.server.http import is_loopback
from mcp_jobs.server.http_answers import Refusal, server_port
from mcp_jobs.server.serve_line import serve_line
from schemas.errors import ErrorPayload

logger = logging.getLogger("mcp_jobs.server.http")

HOST_REFUSED = "HTTP_HOST_REFUSED"
# Its title wherever it is answered (/mcp, the dashboard).
HOST_REFUSED_TITLE = "the Host is not one this server answers"
ORIGIN_REFUSED = "HTTP_ORIGIN_REFUSED"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def answered_names(settings: Settings) -> frozenset[str] | None:
    """The host names a server of `settings` answers (lowercase, an IPv6 address in brackets);
    None beyond loopback: any."""
    if not is_loopback(settings.host):
        return None
    named = (settings.host, *settings.allowed_hosts)
    return frozenset({*LOOPBACK_NAMES, *(_bracketed(name.lower()) for name in named)})


def host_name(host: str) -> str:
    """The name a Host header gives, without its port, lowercase."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def origin_name(origin: str) -> str | None:
    """The host name an Origin header gives (lowercase, IPv6 in brackets); None for an origin
    that is no http(s) page (`null`, `file://`)."""
    try:
        parts = urlsplit(origin.strip())
        name = parts.hostname
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not name:
        return None
    return _bracketed(name)


class HostGuard:
    """ASGI middleware around the MCP endpoint (see the module docstring)."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.names = answered_names(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.names is None:
            await self.app(scope, receive, send)
            return
        host, origin = _header(scope, b"host"), _header(scope, b"origin")
        refusal = None
        if host is None or host_name(host) not in self.names:
            refusal = self._host_refused(scope, host)
        elif origin is not None and origin_name(origin) not in self.names:
            refusal = self._origin_refused(origin)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        if refusal.status == 421:
            _log(scope, "Host", host or "")
        else:
            _log(scope, "Origin", origin or "")
        for part in refusal.answer():
            await send(part)

    def _host_refused(self, scope: Scope, given: str | None) -> Refusal:
        name = host_name(given or "")
        shown = short_repr(given) if given is not None else "(none)"
        cause = (
            f"the Host {shown} is not a name this server answers: on a loopback address it "
            f"answers this machine's ({', '.join(sorted(self.names or ()))}) and the names "
            "--allowed-host gives, against DNS rebinding (a web page that points its own name at "
            "this machine sends that name)"
        )
        port = server_port(scope)
        try:
            allowed = read_allowed_hosts([*self.settings.allowed_hosts, name])
        except HttpSettingInvalidError:
            fix = f"send the header 'Host: 127.0.0.1:{port}'"
            told = f"{cause}; a client names the server as it dials it: {fix}"
        else:
            fix = serve_line(replace(self.settings, allowed_hosts=allowed), port=port)
            told = (
                f"{cause}; a proxy of yours that forwards this name needs it allowed "
                f"(--allowed-host, or {ALLOWED_HOSTS_ENV}): {fix}"
            )
        return Refusal(
            421,
            told,
            data=_typed(HOST_REFUSED, HOST_REFUSED_TITLE, cause, fix),
        )

    def _origin_refused(self, given: str) -> Refusal:
        cause = (
            f"the Origin {short_repr(given)} is a web page this server does not answer: on a "
            "loopback address it answers pages of this machine's names only, against DNS "
            "rebinding"
        )
        fix = "send no Origin header (only a page in a browser sends one)"
        told = (
            f"{cause}; {fix}. --allowed-host takes the Host a proxy in front forwards, never a "
            "page's Origin"
        )
        return Refusal(
            403,
            told,
            data=_typed(ORIGIN_REFUSED, "the Origin is not a page this server answers", cause, fix),
        )


def _typed(code: str, title: str, cause: str, fix: str) -> ErrorPayload:
    return ErrorPayload(code=code, title=title, cause=cause, fix=fix, retryable=False)


def _bracketed(name: str) -> str:
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


def _log(scope: Scope, header: str, given: str) -> None:
    client = scope.get("client")
    remote = f"{client[0]}:{client[1]}" if client else "unknown"
    logger.warning(
        "refused %s %s from %s: its %s %s is not one this server answers",
        scope.get("method", "?"),
        scope.get("path", ""),
        remote,
        header,
        short_repr(given),
    )
