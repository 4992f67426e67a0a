"""The SDK transport's bare HTTP refusals, as a client meets them: each is a JSON-RPC error
(application/json) under the SDK's own status, saying what was refused, why and the fix. Every
server here is the real one `mcp-jobs serve` runs (`serve_http`), on a free loopback port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest

from engine import JobRegistry, connect
from mcp_jobs.config import ServerLimits, Settings
from mcp_jobs.server import build_server
from mcp_jobs.server.http_refusals import SERVER_BUSY
from mcp_jobs.server.http_serve import Listening, serve_http
from tests.mcp.support import INITIALIZE, declare_app

TOKEN = "a-loopback-token"
AUTHORIZED = {"Authorization": f"Bearer {TOKEN}"}
HEADERS = {**AUTHORIZED, "Accept": "application/json, text/event-stream"}
POSTED = {**HEADERS, "Content-Type": "application/json"}
LIMIT = 2048
MODERN = "2026-07-28"


@asynccontextmanager
async def running(**overrides: Any) -> AsyncIterator[tuple[Listening, httpx2.AsyncClient]]:
    registry = JobRegistry()
    declare_app(registry)
    jobs = await connect("memory://", registry=registry)
    settings = Settings(**{"port": 0, "token": TOKEN, **overrides})
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg, httpx2.AsyncClient() as http:
                server = build_server(settings, jobs, http=True)
                listening: Listening = await tg.start(serve_http, server, settings)
                try:
                    yield listening, http
                finally:
                    listening.stop()
    finally:
        await jobs.close()


def refused(
    answer: httpx2.Response, status: int, code: int = -32600, ident: str | int | None = None
) -> str:
    """The JSON-RPC error message of a refusal answered `status`, after checking its shape (and
    that it carries `ident`, the id the request named)."""
    assert answer.status_code == status, (answer.status_code, answer.text)
    assert answer.headers["content-type"] == "application/json"
    assert int(answer.headers["content-length"]) == len(answer.content)
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == ident
    assert body["error"]["code"] == code
    message: str = body["error"]["message"]
    return message


async def test_a_body_over_the_bound_says_the_bound_and_where_large_data_goes() -> None:
    limits = ServerLimits(max_request_bytes=LIMIT)
    big = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"' + b"a" * LIMIT + b'"}}'

    async def streamed() -> AsyncIterator[bytes]:
        yield big[:1000]
        yield big[1000:]

    async with running(limits=limits) as (listening, http):
        declared = await http.post(listening.url, content=big, headers=POSTED)
        said = refused(declared, 413, ident=1)
        assert f"{len(big)} bytes" in said and f"{LIMIT} bytes" in said
        assert "reference" in said
        # Sent in chunks with no Content-Length: refused as it streams in, the bound still said.
        chunked = await http.post(listening.url, content=streamed(), headers=POSTED)
        assert f"{LIMIT} bytes" in refused(chunked, 413, ident=1)
        # A body within the bound is served.
        assert (await http.post(listening.url, json=INITIALIZE, headers=POSTED)).status_code == 200


@pytest.mark.parametrize("given", ["text/plain", None])
async def test_a_wrong_content_type_names_the_one_to_send(given: str | None) -> None:
    headers = dict(HEADERS) if given is None else {**HEADERS, "Content-Type": given}
    async with running() as (listening, http):
        for version in (None, MODERN):
            sent = headers if version is None else {**headers, "MCP-Protocol-Version": version}
            answer = await http.post(listening.url, content=b"{}", headers=sent)
            said = refused(answer, 400)
            assert "Content-Type: application/json" in said
            if given is not None:
                assert repr(given) in said


async def test_a_wrong_accept_names_the_value_to_send() -> None:
    async with running() as (listening, http):
        for version in (None, MODERN):
            sent = {**POSTED, "Accept": "text/html"}
            if version is not None:
                sent["MCP-Protocol-Version"] = version
            answer = await http.post(listening.url, json=INITIALIZE, headers=sent)
            said = refused(answer, 406)
            assert "'text/html'" in said
            assert "Accept: application/json, text/event-stream" in said
        # The GET stream needs the event stream only.
        session = (await http.post(listening.url, json=INITIALIZE, headers=POSTED)).headers
        listen = {**AUTHORIZED, "Accept": "application/json", "MCP-Protocol-Version": "2025-11-25"}
        listen["mcp-session-id"] = session["mcp-session-id"]
        said = refused(await http.get(listening.url, headers=listen), 406)
        assert "Accept: text/event-stream" in said


async def test_a_method_not_served_names_the_ones_that_are() -> None:
    async with running() as (listening, http):
        put = await http.put(listening.url, headers=HEADERS)
        assert "PUT" in refused(put, 405) and "GET, POST, DELETE" in refused(put, 405)
        modern = await http.get(listening.url, headers={**HEADERS, "MCP-Protocol-Version": MODERN})
        said = refused(modern, 405)
        assert "GET" in said and "POST" in said and MODERN in said
        assert modern.headers["allow"] == "POST"


async def test_the_host_guard_answers_in_the_same_shape() -> None:
    async with running() as (listening, http):
        answer = await http.post(
            listening.url, json=INITIALIZE, headers={**POSTED, "Host": "jobs.example.com"}
        )
        assert "--allowed-host jobs.example.com" in refused(answer, 421)


async def test_sessions_over_the_bound_say_when_to_retry_and_which_settings() -> None:
    async with running(max_sessions=1, session_idle_seconds=90.5) as (listening, http):
        first = await http.post(listening.url, json=INITIALIZE, headers=POSTED)
        assert first.status_code == 200
        session = {
            **HEADERS,
            "mcp-session-id": first.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        listen = {**session, "Accept": "text/event-stream"}
        # Its one session busy (an open stream): none idle to close for room.
        async with http.stream("GET", listening.url, headers=listen) as stream:
            assert stream.status_code == 200
            over = await http.post(listening.url, json=INITIALIZE, headers=POSTED)
            said = refused(over, 503, SERVER_BUSY)
            # By then every call in flight has ended (the longest, a wait, is capped at 50 s).
            assert over.headers["retry-after"] == "50"
            for named in ("--max-sessions", "MCP_JOBS_MAX_SESSIONS", "DELETE"):
                assert named in said
            # Ending the open session makes room at once.
            assert (await http.delete(listening.url, headers=session)).status_code == 200
            assert (
                await http.post(listening.url, json=INITIALIZE, headers=POSTED)
            ).status_code == 200


async def test_a_refusal_of_another_kind_passes_unchanged() -> None:
    # The SDK's own JSON-RPC answers that already say what they mean stay as they are.
    async with running() as (listening, http):
        answer = await http.post(listening.url, content=b"{not json", headers=POSTED)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == -32700
        gone = {**POSTED, "mcp-session-id": "0" * 32}
        listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert (await http.post(listening.url, json=listed, headers=gone)).status_code == 404
