"""`mcp-jobs dashboard` bounds a request's headers as `serve` does: past the bound it is answered
a typed 431 before any page is built (a 20 KB header was served)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2

LINE = "dashboard at "


async def test_oversized_headers_get_a_typed_431_and_the_dashboard_keeps_serving(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_JOBS_")}
    env["PYTHONUNBUFFERED"] = "1"
    url = f"sqlite:///{tmp_path}/jobs.db"
    command = [sys.executable, "-m", "mcp_jobs.cli", "dashboard", "--database-url", url]
    with anyio.fail_after(40):
        async with await anyio.open_process(
            [*command, "--port", "0"], cwd=tmp_path, env=env, stderr=subprocess.PIPE
        ) as process:
            assert process.stderr is not None
            seen = ""
            try:
                async for chunk in process.stderr:
                    seen += chunk.decode()
                    if LINE in seen and seen.endswith("\n"):
                        break
                assert LINE in seen, seen
                address = seen[seen.index(LINE) + len(LINE) :].split()[0]
                async with httpx2.AsyncClient(timeout=20) as http:
                    big = await http.get(address, headers={"X-Big": "x" * 20_000})
                    small = await http.get(address)
            finally:
                process.send_signal(signal.SIGTERM)
            await process.wait()
    assert big.status_code == 431, big.text
    assert "HTTP_HEADERS_TOO_LARGE" in big.text
    assert small.status_code == 200
