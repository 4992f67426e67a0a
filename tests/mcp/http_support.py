"""The raw streamable HTTP wire for tests that speak it themselves: the real server
`mcp-jobs serve` runs (`serve_http`, OAuth keys discovered first) on a free loopback port, the
headers a request carries, a legacy (2025-11-25) session opened, a refusal's JSON-RPC error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2

from engine import JobRegistry, connect
from mcp_jobs.config import Settings
from mcp_jobs.server import build_server
from mcp_jobs.server.http_serve import Listening, serve_http
from tests.mcp.support import INITIALIZE, declare_app

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LEGACY = "2025-11-25"
SESSION = "mcp-session-id"
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


@asynccontextmanager
async def running(settings: Settings) -> AsyncIterator[Listening]:
    """`settings` served over HTTP for the life of the block, on the memory driver."""
    registry = JobRegistry()
    declare_app(registry)
    jobs = await connect("memory://", registry=registry)
    if settings.oauth is not None:
        from mcp_jobs.server.oauth import discover

        settings = await discover(settings)
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                server = build_server(settings, jobs, http=True)
                listening: Listening = await tg.start(serve_http, server, settings)
                try:
                    yield listening
                finally:
                    listening.stop()
    finally:
        await jobs.close()


def bearer(token: str) -> dict[str, str]:
    """The headers of a POST carrying `token`, outside any session."""
    return {**HEADERS, "Authorization": f"Bearer {token}"}


def in_session(token: str, session: str) -> dict[str, str]:
    """The headers of a request carrying `token` within the legacy session `session`."""
    return {**bearer(token), SESSION: session, "MCP-Protocol-Version": LEGACY}


def listening_to(token: str, session: str) -> dict[str, str]:
    """The headers of the GET that opens the session's event stream."""
    return {**in_session(token, session), "Accept": "text/event-stream"}


async def open_session(http: httpx2.AsyncClient, url: str, token: str) -> str:
    """A new legacy session opened with `token`: its id."""
    answer = await http.post(url, json=INITIALIZE, headers=bearer(token))
    assert answer.status_code == 200, answer.text
    session: str = answer.headers[SESSION]
    return session


def refusal(answer: httpx2.Response, status: int) -> dict[str, Any]:
    """The JSON-RPC error answer of a refusal answered `status` (`id` and `error`), after
    checking its shape."""
    assert answer.status_code == status, (answer.status_code, answer.text)
    assert answer.headers["content-type"] == "application/json"
    assert int(answer.headers["content-length"]) == len(answer.content)
    body: dict[str, Any] = answer.json()
    assert body["jsonrpc"] == "2.0" and set(body) == {"jsonrpc", "id", "error"}, body
    return body
