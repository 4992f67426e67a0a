"""`mcp-jobs dashboard --port 0` as a real subprocess: started on a database, ready once it
prints `dashboard at http://HOST:PORT/` on stderr (a bounded wait), stopped by its pid."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.browser.seed_app"  # the browser tests' seeded app
READY = re.compile(r"dashboard at (http://\S+/)")
START_SECONDS = 30.0
STOP_SECONDS = 10.0


@dataclass
class Dashboard:
    base: str  # ends with "/"
    url: str  # the jobs database it serves
    read_only: bool
    log: deque[str]

    def at(self, path: str) -> str:
        return self.base + path.lstrip("/")


def _drain(stream: object, lines: queue.Queue[str | None], log: deque[str]) -> None:
    # Read to the end even after the ready line: a full stderr pipe would block the server.
    for line in stream:  # type: ignore[attr-defined]
        log.append(line.rstrip())
        lines.put(line)
    lines.put(None)


@contextmanager
def run_dashboard(
    url: str | None,
    *,
    read_only: bool,
    extra: tuple[str, ...] = (),
    cwd: Path = ROOT,
    app: str | None = APP,
) -> Iterator[Dashboard]:
    """The dashboard on `url` (None: the default database, as a person in `cwd` opens it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_JOBS_")}
    env["PYTHONPATH"] = str(ROOT)  # `--app tests.browser.seed_app` imports from any cwd
    argv = [sys.executable, "-m", "mcp_jobs.cli", "dashboard"]
    argv += ["--database-url", url] if url is not None else []
    argv += ["--app", app] if app is not None else []
    argv += ["--host", "127.0.0.1", "--port", "0", *extra]
    if read_only:
        argv.append("--read-only")
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    log: deque[str] = deque(maxlen=200)
    reader = threading.Thread(target=_drain, args=(proc.stderr, lines, log), daemon=True)
    reader.start()
    try:
        base = _wait_ready(proc, lines, log)
        yield Dashboard(base, url or "(the default database)", read_only, log)
    finally:
        proc.terminate()
        try:
            proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_SECONDS)
        reader.join(STOP_SECONDS)  # the pipe ends with the process
        if proc.stderr is not None:
            proc.stderr.close()


def _wait_ready(
    proc: subprocess.Popen[str], lines: queue.Queue[str | None], log: deque[str]
) -> str:
    deadline = time.monotonic() + START_SECONDS
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            proc.wait(STOP_SECONDS)
            raise RuntimeError(
                f"mcp-jobs dashboard exited ({proc.returncode}) before it was ready:\n"
                + "\n".join(log)
            )
        found = READY.search(line)
        if found:
            return found.group(1)
    raise RuntimeError(
        f"mcp-jobs dashboard printed no ready line in {START_SECONDS:.0f} s:\n" + "\n".join(log)
    )
