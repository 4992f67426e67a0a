"""A POSTed body the HTTP transport cannot parse, or will not read whole, is answered with the id
its text names, as stdio answers such a line (the SDK's answer said null, and a client matching
answers to requests waited): JSON nested past the reader's depth, a lone surrogate escape, a body
over the request bound (its id read from its first bytes, or from its end where it is written
last, as the TypeScript SDK writes it), a body POSTed to a session that has ended. Only the
top-level object's "id" counts; a body naming none (a notification) is answered id null.
Statuses are the SDK's.

JSON nested past pydantic's reader but within Python's reaches the tool on stdio; over HTTP the
SDK parses the body itself, so it stays a parse error, now with its id."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
from mcp.server.transport_security import RequestBodyLimitMiddleware
from starlette.types import Message, Receive, Scope, Send

from mcp_jobs.config import ServerLimits, Settings
from mcp_jobs.server.http_answers import DRAINED_BOUNDS
from mcp_jobs.server.http_refusals import ExplainRefusals
from mcp_jobs.server.json_rpc_text import LONE_SURROGATE, parse_line
from tests.mcp.http_support import in_session, open_session, refusal, running

TOKEN = "a-loopback-token"
LIMIT = 64 * 1024
PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def _settings() -> Settings:
    return Settings(port=0, token=TOKEN, limits=ServerLimits(max_request_bytes=LIMIT))


def _call(ident: str | int, arguments: str) -> bytes:
    """A send_event call whose `arguments` are JSON text json.dumps could not write."""
    head = f'{{"jsonrpc": "2.0", "id": {json.dumps(ident)}, "method": "tools/call", "params": '
    return f'{head}{{"name": "send_event", "arguments": {arguments}}}}}'.encode()


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _deep(ident: str | int, depth: int) -> bytes:
    return _call(ident, '{"name": "e", "key": "k", "payload": {"x": ' + _nested(depth) + "}}")


# (a body, the id its answer carries)
UNPARSED: list[tuple[bytes, str | int | None]] = [
    (_deep(11, 250), 11),  # past pydantic's reader, within Python's
    (_deep("deep-12", 5000), "deep-12"),  # past Python's reader too
    (_call(13, '{"name": "e\\ud800", "key": "k"}'), 13),
    (_call("lone-14", '{"name": "e", "key": "\\udc00x"}'), "lone-14"),
    # Only the top-level id: the one inside params is some other thing's.
    (
        b'{"jsonrpc": "2.0", "params": {"id": 99, "x": '
        + _nested(300).encode()
        + b'}, "id": 15, "method": "ping"}',
        15,
    ),
    # A notification names no id: null is all an answer can carry.
    (
        b'{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"x": '
        + _nested(300).encode()
        + b"}}",
        None,
    ),
]


async def _post(http: httpx2.AsyncClient, url: str, session: str, body: Any) -> httpx2.Response:
    return await http.post(url, content=body, headers=in_session(TOKEN, session))


async def test_a_body_that_cannot_be_parsed_is_answered_with_its_id() -> None:
    async with running(_settings()) as listening, httpx2.AsyncClient() as http:
        session = await open_session(http, listening.url, TOKEN)
        for body, ident in UNPARSED:
            said = refusal(await _post(http, listening.url, session, body), 400)
            assert said["id"] == ident, (body[:80], said)
            error = said["error"]
            assert error["code"] == PARSE_ERROR and error["message"].startswith("Parse error")
            on_stdio = parse_line(body)
            if hasattr(on_stdio, "error"):  # what stdio refuses is refused in its words
                assert error == on_stdio.error.model_dump(exclude_none=True)
        surrogate = refusal(await _post(http, listening.url, session, UNPARSED[2][0]), 400)
        assert surrogate["error"]["message"] == LONE_SURROGATE
        # The session still serves.
        ping = {"jsonrpc": "2.0", "id": 16, "method": "ping"}
        answer = await http.post(listening.url, json=ping, headers=in_session(TOKEN, session))
        assert answer.status_code == 200 and '"id":16' in answer.text


def _big(ident: str | int) -> bytes:
    return _call(ident, '{"name": "e", "key": "k", "payload": "' + "a" * LIMIT + '"}')


def _written_last(ident: str | int, size: int = LIMIT) -> bytes:
    """A tools/call over the bound as the TypeScript SDK writes it (`{...request, jsonrpc, id}`):
    its id the top-level object's last member, far past the bound."""
    arguments = {"name": "e", "key": "k", "payload": "a" * size}
    head = b'{"method": "tools/call", "params": {"name": "send_event", "arguments": '
    return (
        head
        + json.dumps(arguments).encode()
        + b', "id": 9}, "jsonrpc": "2.0", "id": '
        + (json.dumps(ident).encode() + b"}")
    )


def _streamed(body: bytes) -> AsyncIterator[bytes]:
    """`body` sent in chunks with no Content-Length (chunked transfer encoding)."""

    async def chunks() -> AsyncIterator[bytes]:
        for at in range(0, len(body), 4096):
            yield body[at : at + 4096]

    return chunks()


async def test_a_body_over_the_bound_is_answered_with_its_id() -> None:
    filler = b"a" * LIMIT
    late = b'{"jsonrpc": "2.0", "method": "ping", "params": {"x": "' + filler + b'"}, "id": 7}'
    unnamed = b'{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"x": "'
    unnamed += filler + b'"}}'
    # The last "id" is a nested object's: the top-level object names none.
    nested = b'{"jsonrpc": "2.0", "method": "ping", "params": {"x": "' + filler + b'", "id": 8}}'

    async with running(_settings()) as listening, httpx2.AsyncClient() as http:
        session = await open_session(http, listening.url, TOKEN)
        # With a Content-Length (refused by it, unread), then streamed in with none.
        for sent in (lambda body: body, _streamed):
            for body, ident in [
                (_big(21), 21),
                (_big("big-22"), "big-22"),
                (late, 7),
                (_written_last("ts-23"), "ts-23"),
                (_written_last(24, size=8 * LIMIT), 24),
                (unnamed, None),
                (nested, None),
            ]:
                said = refusal(await _post(http, listening.url, session, sent(body)), 413)
                assert said["id"] == ident, (body[-40:], said)
                assert said["error"]["code"] == INVALID_REQUEST
                assert f"{LIMIT} bytes" in said["error"]["message"]
        # The session still serves, on the connection the refused bodies came on.
        ping = {"jsonrpc": "2.0", "id": 25, "method": "ping"}
        answer = await http.post(listening.url, json=ping, headers=in_session(TOKEN, session))
        assert answer.status_code == 200 and '"id":25' in answer.text


async def test_an_id_written_last_past_the_drained_bound_is_not_read() -> None:
    # Read to its end only up to DRAINED_BOUNDS times the bound: a body longer than that is
    # answered with the id its first bytes name (none here), not read without end.
    body = _written_last(26, size=(DRAINED_BOUNDS + 1) * LIMIT)
    async with running(_settings()) as listening, httpx2.AsyncClient() as http:
        session = await open_session(http, listening.url, TOKEN)
        for sent in (body, _streamed(body)):
            said = refusal(await _post(http, listening.url, session, sent), 413)
            assert said["id"] is None, said


async def test_a_body_to_an_ended_session_is_answered_with_its_id() -> None:
    async with running(_settings()) as listening, httpx2.AsyncClient() as http:
        said = refusal(await _post(http, listening.url, uuid.uuid4().hex, _deep(31, 250)), 404)
        assert said["id"] == 31
        assert "initialize" in said["error"]["message"]


class Endless:
    """A client sending a body declared far over the bound, as fast as it is read."""

    def __init__(self) -> None:
        self.sent = 0

    async def receive(self) -> Message:
        chunk = b'{"jsonrpc": "2.0", "id": 41, "params": "' if not self.sent else b"a" * 1000
        self.sent += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}


async def _refused_unread(
    expect: bytes | None, declared: int | None = 100 * LIMIT
) -> tuple[Endless, dict[str, Any]]:
    """The SDK's own bound (refusing by Content-Length, unread; with none, once past the bound)
    behind `ExplainRefusals`."""

    async def never(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("a body over the bound reached the app")

    settings = Settings(token=TOKEN, limits=ServerLimits(max_request_bytes=LIMIT))
    app = ExplainRefusals(RequestBodyLimitMiddleware(never, LIMIT), settings)
    headers = [(b"content-type", b"application/json")]
    if declared is not None:
        headers.append((b"content-length", b"%d" % declared))
    if expect is not None:
        headers.append((b"expect", expect))
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    client, sent = Endless(), []

    async def send(message: Message) -> None:
        sent.append(message)

    with anyio.fail_after(10):
        await app(scope, client.receive, send)
    assert sent[0]["status"] == 413
    answer: dict[str, Any] = json.loads(sent[1]["body"])
    return client, answer


async def test_a_body_declared_over_the_bound_is_read_no_further_than_the_bound() -> None:
    client, answer = await _refused_unread(None)
    assert answer["id"] == 41
    assert LIMIT <= client.sent < LIMIT + 1000


async def test_a_body_sent_without_end_is_read_no_further_than_the_drained_bound() -> None:
    # No Content-Length says where it ends: it is read for an id written last, but not past
    # DRAINED_BOUNDS times the bound.
    client, answer = await _refused_unread(None, declared=None)
    assert answer["id"] == 41
    assert DRAINED_BOUNDS * LIMIT <= client.sent < DRAINED_BOUNDS * LIMIT + 1000


async def test_a_client_waiting_to_send_its_body_is_refused_before_it_sends() -> None:
    client, answer = await _refused_unread(b"100-continue")
    assert client.sent == 0 and answer["id"] is None
