"""`mcp-jobs serve` over stdio as a real subprocess: when the client closes stdin while the server
waits on its answer to an elicitation (a write asking the person to confirm), nobody can answer
any more; the write is declined at once, nothing is written, and the process exits, rather than
waiting out the time the requests in hand get at the end of input (`answer_after_eof_seconds`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from engine import connect
from mcp_jobs.config import ServerLimits
from tests.mcp.support import INITIALIZE

ASKING = {**INITIALIZE, "params": {**INITIALIZE["params"], "capabilities": {"elicitation": {}}}}
# Well under the time requests in hand get at the end of input: the test fails on that wait.
EXIT_WITHIN_S = ServerLimits().answer_after_eof_seconds / 4


async def _line(stdout: BufferedByteReceiveStream) -> dict[str, Any]:
    """The next message the server wrote that is no notification."""
    while True:
        line = await stdout.receive_until(b"\n", 1 << 20)
        message: dict[str, Any] = json.loads(line)
        if "id" in message:
            return message


@pytest.mark.slow
@pytest.mark.parametrize("close", ["after the question", "right after the call"])
async def test_stdin_closed_during_a_question_declines_the_write_and_exits(
    tmp_path: Path, close: str
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    price = {"name": "import_supplier_prices", "input": {"supplier": "leafco", "batch": "b1"}}
    enqueue = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "enqueue_job", "arguments": price},
    }
    call = {
        "jsonrpc": "2.0",
        "id": 10,
        "method": "tools/call",
        "params": {
            "name": "cancel_jobs",
            "arguments": {"name": "import_supplier_prices", "write": True},
        },
    }
    argv = [sys.executable, "-m", "mcp_jobs.cli", "serve", "--app", "examples.shop"]
    env = {**os.environ, "MCP_JOBS_DATABASE_URL": url, "SHOP_DB": str(tmp_path / "shop.db")}
    with anyio.fail_after(40):
        async with await anyio.open_process(argv, env=env, cwd=tmp_path) as process:
            assert process.stdin is not None and process.stdout is not None
            stdout = BufferedByteReceiveStream(process.stdout)
            await process.stdin.send(json.dumps(ASKING).encode() + b"\n")
            assert "result" in await _line(stdout)
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await process.stdin.send(json.dumps(initialized).encode() + b"\n")
            await process.stdin.send(json.dumps(enqueue).encode() + b"\n")
            enqueued = (await _line(stdout))["result"]["structuredContent"]
            assert enqueued["ok"], enqueued
            await process.stdin.send(json.dumps(call).encode() + b"\n")
            if close == "after the question":
                asked = await _line(stdout)
                assert asked["method"] == "elicitation/create", asked
            await process.stdin.aclose()
            with anyio.fail_after(EXIT_WITHIN_S):
                answer = await _line(stdout)
                while answer.get("method") == "elicitation/create":  # asked before it saw EOF
                    answer = await _line(stdout)
                assert await process.wait() == 0
    structured = answer["result"]["structuredContent"]
    assert structured["ok"] is False and structured["error"]["code"] == "WRITE_DECLINED", answer
    jobs = await connect(url, migrate=False)
    try:
        assert (await jobs.get(enqueued["job_id"])).state == "ready"
    finally:
        await jobs.close()
