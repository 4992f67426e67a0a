"""The SDK transport's bare HTTP refusals said as JSON-RPC errors: what was refused, why, and the
fix, under the SDK's own status.

The SDK answers some refusals in plain text ("Request body too large", "Invalid Content-Type
header", "Invalid Host header"), some with no body at all (406 and 405 on a 2026-07-28 request),
and some in JSON-RPC that names no setting ("Too many open sessions"). `ExplainRefusals` sits
right around the SDK's app and replaces those answers; any other answer passes unchanged. The
SDK gives no field to tell its refusals apart, so they are told by status and body, each pinned
by a test (tests/mcp/test_http_refusals.py) that fails if the SDK changes them.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcp.types import INVALID_REQUEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.errors import short_repr
from mcp_jobs.config import ALLOWED_HOSTS_ENV, MAX_SESSIONS_ENV, SESSION_IDLE_ENV, Settings

# JSON-RPC leaves -32000..-32099 to the server; MCP keeps -32020 and up for the spec and the SDK
# uses -32000/-32001. "Busy, retry later" is no internal error (-32603): a code of its own.
SERVER_BUSY = -32010

# The SDK's answer when `--max-sessions` sessions are open.
_TOO_MANY_SESSIONS = "Too many open sessions"
_EXPLAINED = frozenset({400, 403, 405, 406, 413, 421, 503})
_HOST_NAME = re.compile(r"[A-Za-z0-9.-]{1,253}")


@dataclass(frozen=True)
class Refusal:
    """A JSON-RPC error answered with an HTTP status (and any headers it needs)."""

    status: int
    message: str
    code: int = INVALID_REQUEST
    ident: str | int | None = None
    headers: tuple[tuple[bytes, bytes], ...] = ()

    def answer(self, start: Message | None = None) -> tuple[Message, Message]:
        """The `http.response.start` and body messages that send this refusal, keeping the
        headers of `start` (the SDK's answer it replaces) other than its body's."""
        error = {"code": self.code, "message": self.message}
        payload = json.dumps({"jsonrpc": "2.0", "id": self.ident, "error": error}).encode()
        kept = [
            (key, value)
            for key, value in (start or {}).get("headers", ())
            if key.lower() not in (b"content-length", b"content-type")
        ]
        headers = [
            *kept,
            *self.headers,
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(payload)),
        ]
        return (
            {"type": "http.response.start", "status": self.status, "headers": headers},
            {"type": "http.response.body", "body": payload, "more_body": False},
        )


class ExplainRefusals:
    """ASGI middleware right around the SDK's streamable HTTP app: its bare refusals (see the
    module's docstring) answered as JSON-RPC errors that say what to send or set instead."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: Message | None = None

        async def watch(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and message["status"] in _EXPLAINED:
                held = message  # its body decides, for most, whether it is one to explain
                return
            if held is not None and message["type"] == "http.response.body":
                start, held = held, None
                said = explain(scope, start, message.get("body", b""), self.settings)
                if said is not None:
                    start, message = said.answer(start)
                await send(start)
            await send(message)

        await self.app(scope, receive, watch)


def explain(scope: Scope, start: Message, body: bytes, settings: Settings) -> Refusal | None:
    """What the SDK's refusal (`start`, `body`) to the request `scope` means and its fix, when it
    is one of the bare ones; else None (the answer stays)."""
    status = start["status"]
    if status == 413:
        return Refusal(413, _too_large(scope, settings.limits.max_request_bytes))
    if status == 400 and body == b"Invalid Content-Type header":
        return Refusal(400, _content_type(scope))
    if status == 406:
        return Refusal(406, _not_acceptable(scope))
    if status == 405:
        return Refusal(405, _not_allowed(scope, _header(start, b"allow") or "POST"))
    if status in (403, 421) and body in (b"Invalid Host header", b"Invalid Origin header"):
        return Refusal(status, _rebinding(scope, body))
    if status == 503 and _sdk_message(body) == _TOO_MANY_SESSIONS:
        retry = max(1, math.ceil(settings.session_idle_seconds))
        return Refusal(
            503,
            _too_many_sessions(settings, retry),
            SERVER_BUSY,
            headers=((b"retry-after", b"%d" % retry),),
        )
    return None


def _too_large(scope: Scope, limit: int) -> str:
    declared = _header(scope, b"content-length")
    size = f" {declared} bytes," if declared.isdigit() else ""
    return (
        f"Request body too large:{size} over this server's bound of {limit} bytes for one "
        "JSON-RPC message; a call carries a job's arguments, not its data: keep large data in "
        "your own storage (or database) and pass a reference to it (its id or URL)"
    )


def _content_type(scope: Scope) -> str:
    given = _header(scope, b"content-type")
    what = f"Invalid Content-Type header {short_repr(given)}" if given else "No Content-Type header"
    return f"{what}: a JSON-RPC message is POSTed as JSON; send `Content-Type: application/json`"


def _not_acceptable(scope: Scope) -> str:
    given = _header(scope, b"accept")
    what = f"the Accept header {short_repr(given)}" if given else "a request with no Accept header"
    if scope.get("method") == "GET":
        takes, needed = "the event stream a GET opens", "text/event-stream"
    else:
        takes, needed = "a JSON answer or an event stream", "application/json, text/event-stream"
    return f"Not Acceptable: {what} does not take {takes}; send `Accept: {needed}`"


def _not_allowed(scope: Scope, allow: str) -> str:
    version = _header(scope, b"mcp-protocol-version")
    under = f" under MCP-Protocol-Version {short_repr(version)}" if version else ""
    method = scope.get("method", "")  # an HTTP token: the server's parser admits no other
    return f"Method Not Allowed: {method} is not answered here{under}; this endpoint takes {allow}"


def _rebinding(scope: Scope, body: bytes) -> str:
    """The DNS-rebinding guard's refusal of a Host or Origin name, and how to allow the name."""
    if body == b"Invalid Host header":
        given, header = _header(scope, b"host"), "Host"
        name = given.rsplit(":", 1)[0] if given.count(":") == 1 else given
    else:
        given, header = _header(scope, b"origin"), "Origin"
        name = urlsplit(given).hostname or ""
    flag = name if _HOST_NAME.fullmatch(name) else "NAME"
    return (
        f"the {header} {short_repr(given)} is not one this server answers (on a loopback "
        "address it answers this machine's names only, against DNS rebinding); a proxy in "
        f"front that forwards it needs it allowed: serve --allowed-host {flag} "
        f"(or {ALLOWED_HOSTS_ENV}={flag})"
    )


def _too_many_sessions(settings: Settings, retry: int) -> str:
    return (
        f"Too many open sessions: this server keeps at most {settings.max_sessions} open "
        f"(--max-sessions, {MAX_SESSIONS_ENV}) and closes one idle for "
        f"{settings.session_idle_seconds:g} s (--session-idle-seconds, {SESSION_IDLE_ENV}); "
        f"retry after {retry} s, when every session idle now has been closed, end sessions no "
        "longer used (DELETE with their Mcp-Session-Id), or serve with a larger --max-sessions"
    )


def _sdk_message(body: bytes) -> object:
    try:
        said = json.loads(body)
    except ValueError:
        return None
    error = said.get("error") if isinstance(said, dict) else None
    return error.get("message") if isinstance(error, dict) else None


def _header(holder: Scope | Message, name: bytes) -> str:
    """The first `name` header of a request scope or a response start, "" when there is none."""
    for key, value in holder.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return ""
