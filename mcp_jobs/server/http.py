"""Streamable HTTP: loopback by default, and a bearer token on every request.

A request without the token (or with a wrong one) is answered 401 by the SDK's auth middleware
before it reaches a session, so it touches nothing: no database call, no event; the answer names
the check that failed (`token_refusals`, said by `http_refusals`). Each refusal is logged with
the remote address, the path and why (never any part of the token).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from typing import Any

import anyio
import pydantic_core
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.types import PARSE_ERROR, JSONRPCError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_jobs.config import TOKEN_ENV, Settings
from mcp_jobs.errors import TokenRequiredError, TokenTooShortError, new_token_line, token_file_line
from mcp_jobs.server.http_answers import Refusal
from mcp_jobs.server.json_rpc_text import parse_line
from mcp_jobs.server.line_id import top_level_id
from mcp_jobs.server.request_ids import read_message
from mcp_jobs.server.token_refusals import (
    MISSING,
    NOT_BEARER,
    TokenRefusal,
    header_check,
    refusal_notes,
)

TOKEN_CLIENT_ID = "mcp-jobs-token"
# Beyond loopback anyone who can reach the port can guess: 32 characters is what
# 16 random bytes in hex give, the least that makes guessing hopeless.
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


def http_auth(settings: Settings) -> dict[str, Any]:
    """The `MCPServer` keyword arguments that check bearer tokens over HTTP: OAuth access tokens
    when an issuer is set, else the static token (`config.http_settings` allows one only)."""
    if settings.oauth is not None:
        from mcp_jobs.server.oauth import oauth_auth  # PyJWT: the optional `oauth` extra

        return oauth_auth(settings)
    if settings.token:
        return {
            "token_verifier": StaticTokenVerifier(settings.token),
            "auth": auth_settings(settings.host, settings.port),
        }
    return {}


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server reachable from this machine only. A name other
    than `localhost` counts as exposed: what it resolves to is not ours to trust."""
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    # ::ffff:127.0.0.1 is 127.0.0.1 (Python before 3.13 reads it as no loopback address).
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def require_token(settings: Settings) -> str:
    """The token HTTP serves with: always required, and at least 32 characters once the server
    listens beyond loopback."""
    token = settings.token
    if not token:
        raise TokenRequiredError()
    if not is_loopback(settings.host) and len(token) < MIN_EXPOSED_TOKEN_LENGTH:
        raise TokenTooShortError(
            settings.host, len(token), MIN_EXPOSED_TOKEN_LENGTH, _new_token(settings)
        )
    return token


def short_token_warning(settings: Settings) -> str | None:
    """What to warn of at start when the static token is shorter than beyond loopback takes:
    on loopback only this machine's users and processes can guess at it, as they can read a
    token file left open (warned of, not refused); beyond loopback `require_token` refuses it.
    Ends in the line that makes a long one."""
    token = settings.token
    if settings.oauth is not None or not token or len(token) >= MIN_EXPOSED_TOKEN_LENGTH:
        return None
    if not is_loopback(settings.host):
        return None
    return (
        f"the bearer token from {settings.token_source} has {len(token)} characters: this "
        "machine's other users and processes can guess at a token that short; fewer than "
        f"{MIN_EXPOSED_TOKEN_LENGTH} characters are taken on loopback only (beyond it, "
        f"{TokenTooShortError.code}). Make a long one: {_new_token(settings)}"
    )


def _new_token(settings: Settings) -> str:
    if settings.token_source == TOKEN_ENV:
        return new_token_line()
    return token_file_line(settings.token_source)


def refusal_reason(authorization: str | None) -> str:
    """Why a request got 401, from its Authorization header alone (the header is not logged)."""
    failed = header_check(authorization)
    return {MISSING: "missing", NOT_BEARER: "malformed"}.get(failed or "", "wrong")


class LogRefusedRequests:
    """ASGI middleware around the MCP app: a 401 answer is logged as a warning naming the
    remote address, the method and path, and whether the token was missing, malformed or wrong
    (with the verifier's why, when it gave one); a 403 `insufficient_scope` answer likewise."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        notes: list[TokenRefusal] = []
        reset = refusal_notes.set(notes)

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                _log_refusal(scope, notes)
            elif message["type"] == "http.response.start" and _lacks_scope(message):
                _log_refusal(scope, notes, reason="under-scoped")
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            refusal_notes.reset(reset)


def _lacks_scope(start: Message) -> bool:
    return start["status"] == 403 and any(
        key.lower() == b"www-authenticate" and b"insufficient_scope" in value
        for key, value in start.get("headers", ())
    )


def _log_refusal(scope: Scope, notes: list[TokenRefusal], reason: str | None = None) -> None:
    headers = [value for key, value in scope.get("headers", ()) if key.lower() == b"authorization"]
    reason = reason or refusal_reason(headers[0].decode("latin-1") if headers else None)
    client = scope.get("client")
    remote = f"{client[0]}:{client[1]}" if client else "unknown"
    path = scope.get("path", "")
    auth = {"remote": remote, "path": path, "reason": reason}
    detail = notes[0].logged or notes[0].said if notes else ""
    if detail:
        auth["detail"] = detail
    logger.warning(
        "refused %s %s from %s: %s bearer token%s",
        scope.get("method", "?"),
        path,
        remote,
        reason,
        f" ({detail})" if detail else "",
        extra={"auth": auth},
    )


class AnswerInvalidIds:
    """ASGI middleware around the MCP app: a POSTed message the SDK's transport would refuse
    with a validator's dump (-32602, a batch, `"jsonrpc": "1.0"`) or read as a notification
    (an id that is neither a string nor an integer: 202, no answer, so its sender waits) is
    answered 400 with JSON-RPC -32600 instead, as stdio answers it (`request_ids`); a body the
    SDK could not parse (a lone surrogate escape, nesting past its JSON reader) is answered 400
    as stdio answers such a line, with the id its text names (the SDK's says null, and the
    client waits). Only the body the SDK itself read, after its own checks (token, size,
    Content-Type, session), is looked at."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        # The chunks the SDK read, kept by reference: joined only for a 202 or a 400 (no copy
        # per POST).
        chunks: list[bytes] = []
        replaced = False

        async def read() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
            return message

        async def answer(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and _read_by_sdk(message):
                refused = await _refusal(chunks, self.limit)
                if refused is not None:
                    replaced = True
                    for part in refused.answer():
                        await send(part)
                    return
            if not replaced:
                await send(message)

        await self.app(scope, read, answer)


async def _refusal(chunks: list[bytes], limit: int) -> Refusal | None:
    if sum(map(len, chunks)) > limit:
        return None  # the SDK refuses it by its size
    body = b"".join(chunks)
    try:
        raw = pydantic_core.from_json(body)
    except ValueError as exc:
        # Read again as stdio reads a line (Python's reader, up to seconds for a large body):
        # in a worker thread, so the event loop serving every other client does not wait.
        return await anyio.to_thread.run_sync(_unparsed, body, f"Parse error: {exc}")
    message = read_message(raw)
    return Refusal(400, message[1], ident=message[0]) if isinstance(message, tuple) else None


def _unparsed(body: bytes, said: str) -> Refusal:
    """The answer to a body the SDK could not parse (it said `said`): stdio's to that line."""
    on_stdio = parse_line(body)
    if isinstance(on_stdio, JSONRPCError):
        return Refusal(400, on_stdio.error.message, on_stdio.error.code, ident=on_stdio.id)
    # Nested past pydantic's reader, within Python's: stdio hands that on to the tool, which
    # refuses it by its depth, but the SDK reads an HTTP body itself: its parse error stands.
    return Refusal(400, said, PARSE_ERROR, ident=top_level_id(body))


def _read_by_sdk(start: Message) -> bool:
    """Whether the SDK answered a message it parsed: a 202, or a 400 in JSON-RPC (its plain-text
    400, a wrong Content-Type, refused the request before reading it as a message)."""
    if start["status"] == 202:
        return True
    return start["status"] == 400 and any(
        key.lower() == b"content-type" and value.startswith(b"application/json")
        for key, value in start.get("headers", ())
    )
