"""README "Connect an MCP client": the HTTP snippet runs as written. The server block (marked
`<!-- readme-test: http-server -->`) runs in bash in an empty directory, on a free port instead
of 8765; then the Python client block (`<!-- readme-test: http-client -->`) runs in the same
directory, reads the token the way a user's client would, and calls a tool."""

from __future__ import annotations

import os
import re
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

README = Path(__file__).resolve().parents[2] / "README.md"
README_PORT = "8765"
# The variables that would point the snippet at another token, database or app than its own.
OURS = ("MCP_JOBS_TOKEN", "MCP_JOBS_TOKEN_FILE", "MCP_JOBS_DATABASE_URL", "MCP_JOBS_APP", "SHOP_DB")


def snippet(marker: str, language: str) -> str:
    """The fenced block right after `<!-- readme-test: MARKER -->`."""
    pattern = rf"<!-- readme-test: {re.escape(marker)} -->\n```{language}\n(.*?)\n```"
    found = re.findall(pattern, README.read_text(), flags=re.DOTALL)
    assert len(found) == 1, f"README has {len(found)} blocks marked {marker!r}"
    block: str = found[0]
    return block


def _free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


async def _stop(process: Process) -> None:
    """SIGTERM to the snippet's process group (bash and the server it started), then wait."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with anyio.move_on_after(30) as waited:
        await process.wait()
    if waited.cancelled_caught:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_the_readme_http_snippet_runs_as_written(tmp_path: Path) -> None:
    server_block = snippet("http-server", "bash")
    client_block = snippet("http-client", "python")
    assert README_PORT in server_block and README_PORT in client_block
    assert "MCP_JOBS_TOKEN=" not in server_block  # the token is shared through the file
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in OURS}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"

    process = await anyio.open_process(
        ["bash", "-e", "-c", server_block.replace(README_PORT, port)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    log: list[str] = []
    start_line = f"serving MCP at http://127.0.0.1:{port}/mcp"
    # Set once the server says it listens, or once it has exited without saying so.
    started_or_gone = anyio.Event()

    async def read_log() -> None:
        assert process.stderr is not None
        async for chunk in TextReceiveStream(process.stderr):
            log.append(chunk)
            if start_line in "".join(log):
                started_or_gone.set()
        started_or_gone.set()

    try:
        # Bounds the whole run, the log reader included: it ends once the server has exited.
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(read_log)
                with anyio.fail_after(40):
                    await started_or_gone.wait()
                assert start_line in "".join(log), "".join(log)
                token_file = tmp_path / ".mcp-jobs" / "token"
                assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
                assert re.fullmatch(r"[0-9a-f]{64}\n", token_file.read_text())

                with anyio.fail_after(40):
                    client = await anyio.run_process(
                        [sys.executable, "-c", client_block.replace(README_PORT, port)],
                        cwd=tmp_path,
                        env=env,
                        check=False,
                    )
                shown = client.stdout.decode() + client.stderr.decode()
                assert client.returncode == 0, shown
                assert "fulfil_order" in client.stdout.decode(), shown
                await _stop(process)
    finally:
        await _stop(process)
    text = "".join(log)
    assert "bearer token required" in text
    assert token_file.read_text().strip() not in text
    assert "refused" not in text  # the client was let in on its first request
