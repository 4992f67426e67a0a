"""`mcp-jobs serve` over stdio as a real subprocess: a line that is not a JSON-RPC message gets a
JSON-RPC error reply (as over HTTP) instead of silence, and the session goes on serving."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from mcp_jobs.config import ServerLimits
from tests.mcp.support import INITIALIZE

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


# Each line, and the code its reply carries. Its id is the one its text gives, else null (see
# test_stdio_refusal_ids.py): READ_IDS names those.
BAD_LINES: list[tuple[str, bytes, int]] = [
    ("invalid JSON", b'{"jsonrpc": "2.0", "id": 2, "method": ', PARSE_ERROR),
    # Deeper than pydantic reads, but JSON: read by Python's reader, and no message.
    ("nesting 300 deep", b"[" * 300 + b"]" * 300, INVALID_REQUEST),
    (
        "a lone surrogate escape",
        b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": "\\ud800"}}',
        PARSE_ERROR,
    ),
    ("a raw NUL byte", b'{"jsonrpc": "2.0", "id": 4, "method": "ping\x00"}', PARSE_ERROR),
    ("bytes that are not UTF-8", b'{"jsonrpc": "2.0", "id": 5, "method": "\xff\xfe"}', PARSE_ERROR),
    ("JSON that is not a message", b"[1, 2]", INVALID_REQUEST),
    # MCP: a request's id is a string or an integer, never null. A line with any other id
    # read as a notification would leave its sender waiting for an answer.
    *(
        (
            f"a request whose id is {ident}",
            f'{{"jsonrpc": "2.0", "id": {ident}, "method": "tools/list"}}'.encode(),
            INVALID_REQUEST,
        )
        for ident in ('{"a": 1}', "null", "1.5", "true", "[1]")
    ),
    (
        "a line over the request bound",
        b'"' + b"x" * ServerLimits().max_request_bytes + b'"',
        -32600,
    ),
]
# The lines above whose id can be read from their text, though they cannot be parsed.
READ_IDS = {
    "invalid JSON": 2,
    "a lone surrogate escape": 3,
    "a raw NUL byte": 4,
    "bytes that are not UTF-8": 5,
}


class Wire:
    def __init__(self, process: Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = BufferedByteReceiveStream(process.stdout)

    async def send(self, line: bytes | dict[str, Any]) -> None:
        data = json.dumps(line).encode() if isinstance(line, dict) else line
        await self.stdin.send(data + b"\n")

    async def reply(self) -> dict[str, Any]:
        with anyio.fail_after(20):
            line = await self.stdout.receive_until(b"\n", 1 << 20)
        message: dict[str, Any] = json.loads(line)
        return message


async def _expect_error(wire: Wire, what: str, code: int, ident: int | None = None) -> None:
    reply = await wire.reply()
    assert reply.get("error", {}).get("code") == code, (what, reply)
    assert reply["id"] == ident, (what, reply)


@pytest.mark.slow
async def test_a_malformed_line_on_stdio_is_answered_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    argv = [sys.executable, "-m", "mcp_jobs.cli", "serve", "--app", "examples.shop"]
    env = {**os.environ, "MCP_JOBS_DATABASE_URL": url, "SHOP_DB": str(tmp_path / "shop.db")}
    with anyio.fail_after(50):
        async with await anyio.open_process([*argv], env=env, cwd=tmp_path) as process:
            wire = Wire(process)
            for what, line, code in BAD_LINES[:3]:
                await wire.send(line)
                await _expect_error(wire, what, code, READ_IDS.get(what))

            await wire.send(INITIALIZE)
            assert "result" in await wire.reply()
            await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

            for what, line, code in BAD_LINES[3:]:
                await wire.send(line)
                await _expect_error(wire, what, code, READ_IDS.get(what))
            # Not a valid request, but its id can be read: the reply carries it, so a client
            # waiting on that id is released.
            await wire.send({"jsonrpc": "2.0", "id": 41, "method": 7})
            await _expect_error(wire, "a request with a bad method", INVALID_REQUEST, 41)

            await wire.send({"jsonrpc": "2.0", "id": 42, "method": "tools/list"})
            listed = await wire.reply()
            assert listed["id"] == 42
            assert "cancel_job" in {t["name"] for t in listed["result"]["tools"]}

            await wire.stdin.aclose()
            assert await process.wait() == 0


@pytest.mark.slow
async def test_every_request_read_before_stdin_closes_is_answered(tmp_path: Path) -> None:
    """A piped script (`printf … | mcp-jobs serve`) closes stdin right after its last request:
    each request already read is still answered, writes and reads alike, before the exit."""
    url = f"sqlite:///{tmp_path}/jobs.db"
    argv = [sys.executable, "-m", "mcp_jobs.cli", "serve", "--app", "examples.shop"]
    env = {**os.environ, "MCP_JOBS_DATABASE_URL": url, "SHOP_DB": str(tmp_path / "shop.db")}
    price = {"name": "import_supplier_prices", "input": {"supplier": "leafco", "batch": "b1"}}
    calls = [
        ("enqueue_job", price),
        ("enqueue_job", {**price, "input": {"supplier": "leafco", "batch": "b2"}}),
        ("list_jobs", {}),
    ]
    lines = [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [
        {
            "jsonrpc": "2.0",
            "id": 10 + i,
            "method": "tools/call",
            "params": {"name": n, "arguments": a},
        }
        for i, (n, a) in enumerate(calls)
    ]
    with anyio.fail_after(50):
        async with await anyio.open_process([*argv], env=env, cwd=tmp_path) as process:
            wire = Wire(process)
            await wire.stdin.send(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
            await wire.stdin.aclose()
            replies = [await wire.reply() for _ in range(1 + len(calls))]
            assert await process.wait() == 0
    by_id = {r["id"]: r for r in replies}
    assert set(by_id) == {1, 10, 11, 12}, replies
    answers = [by_id[10 + i]["result"]["structuredContent"] for i in range(len(calls))]
    assert [a["ok"] for a in answers] == [True, True, True], answers
