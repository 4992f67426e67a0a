"""`mcp-jobs serve` over stdio as a real subprocess: a client that goes away (closes both pipes, as
a host does when the chat closes or the IDE restarts the server) while a call is in flight is a
normal end. The server stops at once and quietly: exit 0, no traceback, no incident file, the
call cancelled rather than waited out."""

from __future__ import annotations

import io
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCNotification

from mcp_jobs.config import ServerLimits
from mcp_jobs.server.stdio import stdio_transport
from tests.mcp.support import INITIALIZE

# The wait outlasts the bound on the exit: a server that waits the call out fails the test.
WAIT_S = ServerLimits().max_wait_seconds
EXIT_WITHIN_S = WAIT_S / 4


def _message(wire: BinaryIO) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(wire.readline())
    return message


async def _answer(wire: BinaryIO) -> dict[str, Any]:
    """The next message the server wrote that is no notification."""
    while True:
        message = await anyio.to_thread.run_sync(_message, wire, abandon_on_cancel=True)
        if "id" in message:
            return message


@pytest.mark.slow
@pytest.mark.parametrize("progress", [True, False], ids=["with progress", "without progress"])
async def test_a_client_gone_mid_call_ends_the_server_quietly(
    tmp_path: Path, progress: bool
) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    enqueue = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "enqueue_job",
            "arguments": {
                "name": "import_supplier_prices",
                "input": {"supplier": "s", "batch": "b"},
            },
        },
    }
    argv = [sys.executable, "-m", "mcp_jobs.cli", "serve", "--app", "examples.shop"]
    incidents = tmp_path / "incidents"
    env = {
        **os.environ,
        "MCP_JOBS_DATABASE_URL": url,
        "SHOP_DB": str(tmp_path / "shop.db"),
        "MCP_JOBS_INCIDENT_DIR": str(incidents),
    }
    # The server's output on a pipe of our own: anyio's stream would not close its end.
    ours, theirs = os.pipe()
    stdout = os.fdopen(ours, "rb")
    with anyio.fail_after(40), stdout:
        async with await anyio.open_process(argv, env=env, cwd=tmp_path, stdout=theirs) as process:
            os.close(theirs)
            assert process.stdin is not None and process.stderr is not None
            await process.stdin.send(json.dumps(INITIALIZE).encode() + b"\n")
            assert "result" in await _answer(stdout)
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await process.stdin.send(json.dumps(initialized).encode() + b"\n")
            await process.stdin.send(json.dumps(enqueue).encode() + b"\n")
            job_id = (await _answer(stdout))["result"]["structuredContent"]["job_id"]
            # No worker runs: the job stays ready and the wait would last its whole bound.
            params: dict[str, Any] = {
                "name": "wait_for_job",
                "arguments": {"job_id": job_id, "timeout_seconds": WAIT_S},
            }
            if progress:
                params["_meta"] = {"progressToken": "p1"}
            wait = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
            await process.stdin.send(json.dumps(wait).encode() + b"\n")
            if progress:  # its first notification shows the call is in flight
                message = await anyio.to_thread.run_sync(_message, stdout)
                assert message.get("method") == "notifications/progress", message
            await process.stdin.aclose()
            stdout.close()
            with anyio.fail_after(EXIT_WITHIN_S):
                code = await process.wait()
            errors = b"".join([chunk async for chunk in process.stderr]).decode()
    assert code == 0, errors
    assert "Traceback" not in errors and "INTERNAL" not in errors, errors
    assert not incidents.exists() or not any(incidents.iterdir())
    # At most one line says the client went away; no error is logged.
    assert " ERROR " not in errors, errors


class _Closed(io.BytesIO):
    """A client's end of the server's output, closed: every write is a broken pipe."""

    def write(self, data: Any) -> int:
        raise BrokenPipeError(32, "Broken pipe")


async def test_a_write_to_a_client_gone_ends_the_session_with_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_jobs.server")
    ours, theirs = os.pipe()  # the client's input stays open: only the write tells
    note = JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={})
    with os.fdopen(ours, "rb") as stdin, os.fdopen(theirs, "wb"), anyio.fail_after(10):
        async with stdio_transport(
            max_request_bytes=1 << 20, answer_seconds=60, stdin=stdin, stdout=_Closed()
        ) as (read, write):
            await write.send(SessionMessage(note))
            await write.send(SessionMessage(note))  # drained: the session's last writes go on
            async with read, write:
                async for _ in read:  # ends: the session reads no more
                    pass
    gone = [r for r in caplog.records if "closed the connection" in r.getMessage()]
    assert len(gone) == 1 and gone[0].levelname == "INFO", caplog.records
