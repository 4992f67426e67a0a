"""The real transports: `mcp-jobs serve` as a stdio subprocess, and streamable HTTP with and
without the bearer token."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from engine import JobRegistry, connect
from mcp_jobs.config import Settings
from mcp_jobs.server import build_server
from tests.mcp.support import Caller, declare_app

TOKEN = "s3cret-token-for-tests"


@pytest.mark.slow
async def test_a_stdio_subprocess_session(tmp_path: Path, mode: str) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_jobs.cli", "serve", "--app", "examples.shop", "--database-url", url],
        env={**os.environ, "SHOP_DB": str(tmp_path / "shop.db")},
        cwd=str(tmp_path),
    )
    with anyio.fail_after(45):
        async with Client(stdio_client(params), mode=mode) as client:
            mcp = Caller(client)
            await mcp.load()
            names = {d["name"] for d in (await mcp.ok("describe_jobs"))["jobs"]}
            assert "fulfil_order" in names
            order = {"order_id": 1, "sku": "mug", "quantity": 1}
            made = await mcp.ok("enqueue_job", {"name": "fulfil_order", "input": order})
            listed = await mcp.ok("list_jobs")
            assert [j["id"] for j in listed["jobs"]] == [made["job_id"]]
            await mcp.fails("inspect_job", {"job_id": "0" * 32}, "JOB_NOT_FOUND")
    # The subprocess wrote to the same database the test can read.
    jobs = await connect(url, migrate=False)
    try:
        assert (await jobs.get(made["job_id"])).name == "fulfil_order"
    finally:
        await jobs.close()


def _loopback_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock


@pytest.mark.slow
async def test_http_answers_401_and_touches_nothing_without_the_token(mode: str) -> None:
    registry = JobRegistry()
    declare_app(registry)
    jobs = await connect("memory://", registry=registry)
    sock = _loopback_socket()
    port = sock.getsockname()[1]
    settings = Settings(token=TOKEN, port=port)
    app = build_server(settings, jobs, http=True).streamable_http_app(host="127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    url = f"http://127.0.0.1:{port}/mcp"
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "enqueue_job", "arguments": {"name": "greet", "input": {"user_id": 1}}},
    }
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.serve, [sock])
                async with httpx2.AsyncClient() as http:
                    bare = await http.post(url, json=call, headers=headers)
                    assert bare.status_code == 401
                    wrong = {**headers, "Authorization": "Bearer not-the-token"}
                    assert (await http.post(url, json=call, headers=wrong)).status_code == 401
                assert (await jobs.list()).jobs == []

                authorized = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})
                async with (
                    authorized,
                    Client(
                        streamable_http_client(url, http_client=authorized), mode=mode
                    ) as client,
                ):
                    mcp = Caller(client)
                    await mcp.load()
                    made = await mcp.ok("enqueue_job", call["params"]["arguments"])  # type: ignore[index]
                    assert made["deduped"] is False
                server.should_exit = True
        assert len((await jobs.list()).jobs) == 1
    finally:
        sock.close()
        await jobs.close()
