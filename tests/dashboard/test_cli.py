"""`mcp-jobs dashboard`: a real process on a free port prints where it listens and serves the
overview; a busy port and a missing token beyond loopback are typed errors."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest

from engine import JobRegistry, connect
from mcp_jobs.cli import main
from tests.dashboard.support import Marks, declare, seed
from tests.support.fix_lines import command_words

LINE = "dashboard at "


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_JOBS_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@asynccontextmanager
async def started(argv: list[str], cwd: Path) -> AsyncIterator[str]:
    """`mcp-jobs dashboard` with `argv` running; its printed address, until stopped."""
    command = [sys.executable, "-m", "mcp_jobs.cli", "dashboard", *argv]
    async with await anyio.open_process(
        command, cwd=cwd, env=_env(), stderr=subprocess.PIPE
    ) as process:
        assert process.stderr is not None
        seen = ""
        try:
            async for chunk in process.stderr:
                seen += chunk.decode()
                if LINE in seen and seen.endswith("\n"):
                    break
            assert LINE in seen, seen
            yield seen[seen.index(LINE) + len(LINE) :].split()[0]
        finally:
            process.send_signal(signal.SIGTERM)
        # uvicorn stops gracefully, then re-raises the signal it caught (as `serve` does).
        assert await process.wait() in (0, -signal.SIGTERM)


@pytest.mark.slow
async def test_it_starts_before_its_database_answers_and_serves_the_503_page(
    tmp_path: Path,
) -> None:
    """As `serve` and `worker` wait for their database (compose, systemd starting them beside
    it), the dashboard starts and answers 503 with Retry-After until it does."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"postgresql://nobody@127.0.0.1:{s.getsockname()[1]}/none"
    argv = ["--database-url", url, "--port", "0"]
    with anyio.fail_after(50):
        async with started(argv, tmp_path) as address, httpx2.AsyncClient(timeout=40) as http:
            page = await http.get(address + "workers")
    assert page.status_code == 503 and int(page.headers["retry-after"]) > 0
    assert Marks(page.text).one("error-code").text == "DRIVER_UNAVAILABLE"


async def test_the_command_prints_its_address_and_serves_the_overview(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/jobs.db"
    registry = JobRegistry()
    declare(registry)
    jobs = await connect(url, registry=registry)
    try:
        await seed(jobs)
        stats = {q.queue: q for q in await jobs.stats()}
    finally:
        await jobs.close()
    argv = [sys.executable, "-m", "mcp_jobs.cli", "dashboard", "--database-url", url, "--port", "0"]
    with anyio.fail_after(45):
        async with await anyio.open_process(
            argv, cwd=tmp_path, env=_env(), stderr=subprocess.PIPE
        ) as process:
            assert process.stderr is not None
            seen = ""
            try:
                async for chunk in process.stderr:
                    seen += chunk.decode()
                    if LINE in seen and seen.endswith("\n"):
                        break
                address = seen[seen.index(LINE) + len(LINE) :].split()[0]
                assert address.startswith("http://127.0.0.1:") and address.endswith("/")
                async with httpx2.AsyncClient() as http:
                    page = await http.get(address)
            finally:
                process.send_signal(signal.SIGTERM)
            # uvicorn stops gracefully, then re-raises the signal it caught (as `serve` does).
            assert await process.wait() in (0, -signal.SIGTERM)
    assert page.status_code == 200
    marks = Marks(page.text)
    for queue, counted in stats.items():
        assert int(marks.one(f"queue:{queue}:dead").attrs["data-value"]) == counted.dead
        assert int(marks.one(f"queue:{queue}:ready").attrs["data-value"]) == counted.ready


def test_a_busy_port_is_a_typed_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        code = main(
            ["dashboard", "--database-url", f"sqlite:///{tmp_path}/j.db", "--port", str(port)]
        )
    err = capsys.readouterr().err
    assert code == 1 and "error HTTP_BIND_FAILED" in err
    # The command again on a port free now (the kernel's pick), not a tool slim images lack.
    words = command_words(err.split("fix:", 1)[1].strip())
    assert words[:2] == ["mcp-jobs", "dashboard"]
    free = int(words[words.index("--port") + 1])
    assert free != port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", free))


@pytest.mark.parametrize(
    ("flags", "mended"),
    [
        (["--host", "bad host;x"], ["--host", "127.0.0.1"]),
        (["--host", "nosuchhost.invalid"], ["--host", "127.0.0.1"]),
        (["--host", "192.0.2.1"], ["--host", "127.0.0.1"]),  # TEST-NET-1: no interface has it
    ],
)
def test_a_host_it_cannot_listen_on_is_mended_to_loopback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], mended: list[str]
) -> None:
    url = f"sqlite:///{tmp_path}/j.db"
    token = tmp_path / "token"
    token.write_text("t" * 64)
    token.chmod(0o600)  # one others can read is refused beyond loopback before the bind
    code = main(["dashboard", "--database-url", url, "--token-file", str(token), *flags])
    err = capsys.readouterr().err
    assert code == 1, err
    words = command_words(err.split("fix:", 1)[1].strip())
    at = words.index("--host")
    assert words[at : at + 2] == mended and "bad host;x" not in words


def test_beyond_loopback_it_needs_a_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_JOBS_TOKEN", raising=False)
    monkeypatch.delenv("MCP_JOBS_TOKEN_FILE", raising=False)
    db = tmp_path / "never.db"
    argv = ["dashboard", "--database-url", f"sqlite:///{db}", "--host", "0.0.0.0", "--port", "0"]
    assert main(argv) == 1
    assert "error HTTP_TOKEN_REQUIRED" in capsys.readouterr().err
    monkeypatch.setenv("MCP_JOBS_TOKEN", "short")
    assert main(argv) == 1
    assert "error HTTP_TOKEN_TOO_SHORT" in capsys.readouterr().err
    assert not db.exists()  # refused before the database opened
