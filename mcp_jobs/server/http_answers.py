"""A refusal the HTTP transport answers itself: a JSON-RPC error under an HTTP status, with the
typed refusal (code, cause, fix) as its `data` where there is one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
from mcp.types import INVALID_REQUEST
from starlette.types import Message, Receive, Scope

from mcp_jobs.server.line_id import kept_tail, over_size_id
from schemas.errors import ErrorPayload

# JSON-RPC leaves -32000..-32099 to the server; MCP keeps -32020 and up for the spec and the SDK
# uses -32000/-32001. "Busy, retry later" is no internal error (-32603): a code of its own.
SERVER_BUSY = -32010
# An over-size body up to this many times the request bound is read to its end, dropped as it
# comes, for an id written last (a client waits on it); a longer one is read no further than
# the bound: a client sending without end is not read without end.
DRAINED_BOUNDS = 16


@dataclass(frozen=True)
class Refusal:
    """A JSON-RPC error answered with an HTTP status (and any headers it needs, each replacing
    the one of that name it answers in place of); `data` the typed refusal, when there is one."""

    status: int
    message: str
    code: int = INVALID_REQUEST
    ident: str | int | None = None
    headers: tuple[tuple[bytes, bytes], ...] = ()
    data: ErrorPayload | None = None

    def answer(self, start: Message | None = None) -> tuple[Message, Message]:
        """The `http.response.start` and body messages that send this refusal, keeping the
        headers of `start` (the SDK's answer it replaces) other than its body's and ours."""
        error: dict[str, object] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data.model_dump(mode="json", exclude_none=True)
        payload = json.dumps({"jsonrpc": "2.0", "id": self.ident, "error": error}).encode()
        ours = {key.lower() for key, _ in self.headers}
        kept = [
            (key, value)
            for key, value in (start or {}).get("headers", ())
            if key.lower() not in {b"content-length", b"content-type", *ours}
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


def server_port(scope: Scope) -> int | None:
    """The port the request reached (a server started on port 0 took one), if known."""
    server = scope.get("server")
    return int(server[1]) if server and server[1] is not None else None


async def body_id(
    chunks: Sequence[bytes], limit: int, tail: bytes | None = None
) -> str | int | None:
    """The id of the JSON-RPC request whose body, or its first part, was read as `chunks`: read
    from the text of its first `limit` bytes, else from its last bytes `tail` where its end was
    read (`line_id.over_size_id`, as stdio reads a line), so a refusal of a body that cannot be
    parsed or is over the bound still frees the client waiting on it. In a worker thread: a scan
    of a large body takes seconds the event loop must not spend."""
    head: list[bytes] = []
    held = 0
    for chunk in chunks:
        if held >= limit:
            break
        head.append(chunk[: limit - held])
        held += len(head[-1])
    return await anyio.to_thread.run_sync(over_size_id, b"".join(head), tail)


async def body_tail(
    receive: Receive, chunks: Sequence[bytes], more: bool, limit: int, declared: int | None
) -> bytes | None:
    """The last bytes of an over-size body whose first part was read as `chunks` (`more`: whether
    the client may send more of it), the rest read from `receive` to its end and dropped as it
    comes; None where its end is not reached within `DRAINED_BOUNDS` times `limit`, or was never
    to be (its declared length `declared` is past that), or the client went first."""
    bound = DRAINED_BOUNDS * limit
    if more and declared is not None and declared > bound:
        return None
    tail, size = b"", 0
    for chunk in chunks:
        tail, size = kept_tail(tail, chunk), size + len(chunk)
    while more:
        if size >= bound:
            return None
        message = await receive()
        if message["type"] != "http.request":
            return None  # the client went: what was read last is not the body's end
        body = message.get("body", b"")
        tail, size = kept_tail(tail, body), size + len(body)
        more = bool(message.get("more_body", False))
    return tail
