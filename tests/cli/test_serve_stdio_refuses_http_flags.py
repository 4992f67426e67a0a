"""`mcp-jobs serve` over stdio (the default transport) refuses a flag only HTTP reads: each was
dropped without a word (`serve --port 8000 --token-file tok`, `--transport http` forgotten,
started a stdio server that waited on the terminal), as `worker --metrics-host` without
`--metrics-port` is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.databases import migrated
from tests.support.fix_lines import command_words

HTTP_ONLY = [
    ("--port", "8000"),
    ("--host", "0.0.0.0"),
    ("--token-file", "tok"),
    ("--session-idle-seconds", "60"),
    ("--max-sessions", "5"),
    ("--allowed-host", "proxy.example"),
    ("--oauth-issuer", "https://issuer.example"),
    ("--oauth-algorithms", "RS256"),
]


@pytest.mark.parametrize(("flag", "value"), HTTP_ONLY)
@pytest.mark.parametrize("transport", [(), ("--transport", "stdio")])
def test_serve_over_stdio_refuses_a_flag_only_http_reads(
    flag: str, value: str, transport: tuple[str, ...], url: str, tmp_path: Path
) -> None:
    migrated(url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_JOBS_", "SHOP_"))}
    argv = ["serve", "--database-url", url, *transport, flag, value]
    done = subprocess.run(
        [sys.executable, "-m", "mcp_jobs.cli", *argv],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,  # a stdio server that started reads EOF and ends
        capture_output=True,
        text=True,
        timeout=60,
    )
    err = done.stderr
    assert done.returncode == 1, (done.returncode, err)
    assert "error INVALID_ARGUMENT" in err and "Traceback" not in err
    assert "--transport http" in err  # the cause says which transport reads it
    (fix,) = [line.split("fix:", 1)[1].strip() for line in err.splitlines() if "fix:" in line]
    words = command_words(fix)
    # The line as typed, served over HTTP: every flag given is read there. Leaving out only
    # the refused one left the next (`--port` beside `--token-file`) to be refused in turn.
    assert words[:2] == ["mcp-jobs", "serve"], fix
    assert words.count("--transport") == 1 and words[words.index("--transport") + 1] == "http"
    # A file by its absolute path: the line runs from any directory (as `serve_line` names it).
    named = str(tmp_path / value) if flag == "--token-file" else value
    assert words[words.index(flag) + 1] == named
    assert words[words.index("--database-url") + 1] == url
