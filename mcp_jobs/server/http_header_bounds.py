"""How much header a request may carry: past the bound it is answered 431 with a typed refusal
before any other layer (token, session, dashboard) looks at it.

h11 (uvicorn's parser) holds at most `H11_BUFFER_BYTES` of a head that has not ended, so a
header that never ends is cut off with its plain 400; a head that arrives whole in one read
passes that check at any size, and is bounded here. A head between the two bounds gets this
431 however it arrives; past h11's, a 431 or h11's 400, by how the reads fell.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_jobs.server.http_answers import Refusal
from schemas.errors import ErrorPayload

logger = logging.getLogger("mcp_jobs.server.http")

HEADERS_TOO_LARGE = "HTTP_HEADERS_TOO_LARGE"
# A client sends a dozen headers; a proxy adds a few. 16 KiB holds a large OAuth JWT (a few KB)
# with room to spare, as Node's default does.
MAX_HEADER_BYTES = 16 * 1024
MAX_HEADER_FIELDS = 100
# The head h11 buffers before it ends: above ours, so any head up to it reaches the 431.
H11_BUFFER_BYTES = 2 * MAX_HEADER_BYTES


class HeaderBounds:
    """ASGI middleware: a request whose headers exceed `MAX_HEADER_FIELDS` fields or
    `MAX_HEADER_BYTES` bytes (names and values) is answered 431, the app never called."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", ())
        size = sum(len(name) + len(value) for name, value in headers)
        if len(headers) <= MAX_HEADER_FIELDS and size <= MAX_HEADER_BYTES:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        logger.warning(
            "refused %s %s from %s: %d header fields, %d bytes",
            scope.get("method", "?"),
            scope.get("path", ""),
            f"{client[0]}:{client[1]}" if client else "unknown",
            len(headers),
            size,
        )
        for part in too_large(len(headers), size).answer():
            await send(part)


def too_large(fields: int, size: int) -> Refusal:
    cause = (
        f"the request carries {fields} header fields, {size} bytes; this server takes at most "
        f"{MAX_HEADER_FIELDS} fields and {MAX_HEADER_BYTES} bytes"
    )
    fix = (
        "send the request with only the headers MCP needs (Authorization, Content-Type, "
        "Accept, Mcp-Session-Id, MCP-Protocol-Version), within those bounds"
    )
    payload = ErrorPayload(
        code=HEADERS_TOO_LARGE,
        title="the request's headers are over the server's bound",
        cause=cause,
        fix=fix,
        retryable=False,
    )
    return Refusal(431, f"{cause}; {fix}", data=payload)
