"""The DNS-rebinding guard of a loopback server: on every loopback bind address, Host and Origin
names of this machine (in any case) are answered and others refused, 421 / 403, the Host
refusal's fix the `mcp-jobs serve` line that allows the name, which runs as given."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import httpx2
import pytest

from mcp_jobs.cli.parser import build_parser
from mcp_jobs.config import Settings
from mcp_jobs.server.http import is_loopback
from tests.mcp.http_support import bearer, refusal, running
from tests.mcp.support import INITIALIZE
from tests.support.fix_lines import command_words

TOKEN = "a-loopback-token"
START_SECONDS = 30


@pytest.mark.parametrize("host", ["127.0.0.2", "LOCALHOST", "::ffff:127.0.0.1", "127.0.0.1"])
async def test_every_loopback_bind_answers_this_machines_names_only(host: str) -> None:
    assert is_loopback(host)
    async with running(Settings(host=host, port=0, token=TOKEN)) as listening:
        port = int(listening.url.rsplit(":", 1)[1].split("/")[0])
        bound = f"[{host}]" if ":" in host else host
        async with httpx2.AsyncClient() as http:
            for name in (bound, "localhost", "LocalHost", "127.0.0.1", "[::1]"):
                for shown in (name, f"{name}:{port}"):
                    headers = {**bearer(TOKEN), "Host": shown}
                    answer = await http.post(listening.url, json=INITIALIZE, headers=headers)
                    assert answer.status_code == 200, (shown, answer.text)
            for origin in (f"http://{bound.upper()}:{port}", "https://localhost"):
                headers = {**bearer(TOKEN), "Origin": origin}
                answer = await http.post(listening.url, json=INITIALIZE, headers=headers)
                assert answer.status_code == 200, (origin, answer.text)
            evil = await http.post(
                listening.url, json=INITIALIZE, headers={**bearer(TOKEN), "Host": "evil.com"}
            )
            refusal(evil, 421)
            # A 2026-07-28 request, which opens no session, is guarded the same.
            modern = {**bearer(TOKEN), "Host": "evil.com", "MCP-Protocol-Version": "2026-07-28"}
            refusal(await http.post(listening.url, json=INITIALIZE, headers=modern), 421)
            crossed = await http.post(
                listening.url,
                json=INITIALIZE,
                headers={**bearer(TOKEN), "Origin": "http://evil.com"},
            )
            refusal(crossed, 403)


async def test_an_origin_refusal_does_not_ask_to_allow_the_page() -> None:
    async with running(Settings(port=0, token=TOKEN)) as listening, httpx2.AsyncClient() as http:
        for origin in ("http://evil.com", "null", "file://"):
            headers = {**bearer(TOKEN), "Origin": origin}
            said = refusal(await http.post(listening.url, json=INITIALIZE, headers=headers), 403)
            error = said["error"]
            assert "--allowed-host evil.com" not in error["message"]
            assert "--allowed-host" not in error["data"]["fix"]
            assert error["data"]["code"] == "HTTP_ORIGIN_REFUSED"
            # What --allowed-host is for: the Host a proxy forwards, not a page's Origin.
            assert "Host" in error["message"] and "proxy" in error["message"]


def _serve_port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


async def test_a_host_refusals_fix_is_the_serve_line_that_allows_it(tmp_path: Path) -> None:
    settings = Settings(port=0, token=TOKEN, database_url="memory://", max_sessions=7)
    proxied = {**bearer(TOKEN), "Host": "jobs.example.com"}
    async with running(settings) as listening, httpx2.AsyncClient() as http:
        port = _serve_port(listening.url)
        said = refusal(await http.post(listening.url, json=INITIALIZE, headers=proxied), 421)
    error = said["error"]
    assert error["data"]["code"] == "HTTP_HOST_REFUSED"
    fix = error["data"]["fix"]
    assert fix in error["message"]
    words = command_words(fix)
    assert words[0].endswith("mcp-jobs") and words[1] == "serve"
    # The server as it ran: the same port, bound and database, the name allowed.
    args = build_parser().parse_args(words[1:])
    assert (args.transport, args.port, args.max_sessions) == ("http", port, 7)
    assert args.allowed_host == ["jobs.example.com"]
    assert args.database_url == "memory://"

    # Run as given (the port is free again), it answers the name.
    await anyio.to_thread.run_sync(_run_and_ask, fix, port, tmp_path)


def _run_and_ask(fix: str, port: int, place: Path) -> None:
    """Start `fix` (a serve line) in a shell, wait for its start line, POST an initialize with
    the allowed Host, and stop it."""
    env = {**os.environ, "MCP_JOBS_TOKEN": TOKEN, "PATH": f"{Path(sys.executable).parent}:/bin"}
    env.pop("MCP_JOBS_TOKEN_FILE", None)
    process = subprocess.Popen(
        ["sh", "-c", fix],
        cwd=place,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started = threading.Event()
    seen: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            seen.append(line)
            if "serving MCP at" in line:
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert started.wait(START_SECONDS), (shlex.split(fix), seen)
        headers = {**bearer(TOKEN), "Host": "jobs.example.com"}
        answer = httpx2.post(
            f"http://127.0.0.1:{port}/mcp", json=INITIALIZE, headers=headers, timeout=10
        )
        assert answer.status_code == 200, answer.text
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=START_SECONDS)
        reader.join(timeout=START_SECONDS)
        assert process.stderr is not None
        process.stderr.close()
    assert not any(re.search(r"Traceback", line) for line in seen), seen
