"""The SDK transport's bare HTTP refusals said as JSON-RPC errors: what was refused, why, and the
fix, under the SDK's own status.

The SDK answers some refusals in plain text ("Request body too large", "Invalid Content-Type
header"), some with no body at all (406 and 405 on a 2026-07-28 request), some in JSON-RPC that
names no setting ("Too many open sessions", "Session not found"), and a refused token with
RFC 6750's bare "Authentication required". `ExplainRefusals` sits right around the SDK's app and
replaces those answers; any other answer passes unchanged. The SDK gives no field to tell its
refusals apart, so they are told by status and body, each pinned by a test
(tests/mcp/test_http_refusals.py, test_http_sessions.py, test_http_token_refusals.py) that fails
if the SDK changes them.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.errors import short_repr
from mcp_jobs.config import MAX_SESSIONS_ENV, SESSION_IDLE_ENV, Settings
from mcp_jobs.errors import ScopeMissingError
from mcp_jobs.server.http_answers import (
    SERVER_BUSY,
    Refusal,
    body_id,
    body_tail,
    server_port,
)
from mcp_jobs.server.http_sessions import session_share
from mcp_jobs.server.serve_line import serve_line
from mcp_jobs.server.token_refusals import description, payload, refusal_of

# The SDK's answers, as it words them.
_TOO_MANY_SESSIONS = "Too many open sessions"
_SESSION_ENDED = frozenset({"Session not found", "Not Found: Session has been terminated"})
_EXPLAINED = frozenset({400, 401, 403, 404, 405, 406, 413, 503})
_PARAMETER = re.compile(rb'(\w+)="([^"]*)"')


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
        # The body the SDK read, kept by reference: scanned only for the id a 404 or a 413
        # echoes; `more`, whether the client may send more of it.
        chunks: list[bytes] = []
        size, more = 0, scope.get("method") == "POST"

        async def read() -> Message:
            nonlocal size, more
            message = await receive()
            if message["type"] == "http.request" and scope.get("method") == "POST":
                chunks.append(message.get("body", b""))
                size += len(chunks[-1])
                more = bool(message.get("more_body", False))
            else:
                more = False
            return message

        async def watch(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and message["status"] in _EXPLAINED:
                held = message  # its body decides, for most, whether it is one to explain
                return
            if held is not None and message["type"] == "http.response.body":
                start, held = held, None
                body = message.get("body", b"")
                said = explain(scope, start, body, self.settings)
                limit = self.settings.limits.max_request_bytes
                tail = None
                if said is not None and said.status == 413 and not _expects_continue(scope):
                    # The SDK refuses a body declared over the bound unread: its first bytes are
                    # read for the id, and its end for an id written last (`body_tail`).
                    while more and size < limit:
                        await read()
                    tail = await body_tail(receive, chunks, more, limit, _declared(scope))
                if said is not None and said.status in (404, 413):
                    said = replace(said, ident=await body_id(chunks, limit, tail))
                if said is not None:
                    start, message = said.answer(start)
                await send(start)
            await send(message)

        await self.app(scope, read, watch)


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
    challenge = _header(start, b"www-authenticate").encode("latin-1")
    if status == 401 and challenge.startswith(b"Bearer "):
        return _token_refused(scope, challenge, settings)
    if status == 403 and b'error="insufficient_scope"' in challenge:
        return _under_scoped(scope)
    if status == 404 and _header(scope, b"mcp-session-id") and _sdk_message(body) in _SESSION_ENDED:
        return Refusal(404, _session_ended(settings))
    if status == 503 and _sdk_message(body) == _TOO_MANY_SESSIONS:
        retry = max(1, math.ceil(settings.session_idle_seconds))
        return Refusal(
            503,
            _too_many_sessions(scope, settings, retry),
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


def _token_refused(scope: Scope, challenge: bytes, settings: Settings) -> Refusal:
    """The SDK's 401 with the check that failed named, in the challenge and the body."""
    authorization = _header(scope, b"authorization") if _has(scope, b"authorization") else None
    refusal = refusal_of(authorization, settings)
    typed = payload(refusal, settings)
    parameters = dict(_PARAMETER.findall(challenge))
    parameters[b"error_description"] = description(refusal).encode()
    said = b", ".join(b'%s="%s"' % item for item in parameters.items())
    return Refusal(
        401,
        f"Unauthorized: {typed.cause}; {typed.fix}",
        headers=((b"www-authenticate", b"Bearer " + said),),
        data=typed,
    )


def _under_scoped(scope: Scope) -> Refusal:
    """The SDK's 403 for a token without the scope every request needs, typed."""
    auth = scope.get("auth")
    granted = [str(s) for s in getattr(auth, "scopes", ())]
    refused = ScopeMissingError("every request", "jobs:read", granted)
    return Refusal(403, f"Forbidden: {refused.cause}; {refused.fix}", data=refused.to_payload())


def _session_ended(settings: Settings) -> str:
    return (
        "Session not found: no session with this Mcp-Session-Id is open for this token; it "
        "ended (the server restarted, it was idle past --session-idle-seconds "
        f"({settings.session_idle_seconds:g} s), or it was closed by DELETE or to make room for "
        "a newer session of the same token) or never was this token's; initialize a new "
        "session: POST an initialize request without Mcp-Session-Id"
    )


def _too_many_sessions(scope: Scope, settings: Settings, retry: int) -> str:
    larger = replace(settings, max_sessions=settings.max_sessions * 2)
    return (
        f"Too many open sessions: this server keeps at most {settings.max_sessions} open "
        f"(--max-sessions, {MAX_SESSIONS_ENV}), {session_share(settings)} a token, and closes "
        f"one idle for {settings.session_idle_seconds:g} s (--session-idle-seconds, "
        f"{SESSION_IDLE_ENV}); retry after {retry} s, when every session idle now has been "
        f"closed; its operator can serve more: {serve_line(larger, port=server_port(scope))}"
    )


def _expects_continue(scope: Scope) -> bool:
    """Whether the client waits to be told to send its body: a refusal tells it not to."""
    return _header(scope, b"expect").lower() == "100-continue"


def _declared(scope: Scope) -> int | None:
    declared = _header(scope, b"content-length")
    return int(declared) if declared.isascii() and declared.isdigit() else None


def _sdk_message(body: bytes) -> object:
    try:
        said = json.loads(body)
    except ValueError:
        return None
    error = said.get("error") if isinstance(said, dict) else None
    return error.get("message") if isinstance(error, dict) else None


def _has(holder: Scope | Message, name: bytes) -> bool:
    return any(key.lower() == name for key, _ in holder.get("headers", ()))


def _header(holder: Scope | Message, name: bytes) -> str:
    """The first `name` header of a request scope or a response start, "" when there is none."""
    for key, value in holder.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return ""
