"""Worker processes for the fault tests of every server-backed driver, and reading their logs.

Each process is `tests/support/fault_worker.py` in its own interpreter; its log holds one line
per job execution ("ran ID ATTEMPT"), step and answered ack ("acked ID"): what a test counts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc

from tests.postgres.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]


def lines(path: Path) -> list[str]:
    """The complete lines of `path`. A read may meet a line its writer has not finished (a
    "ran " without its id, seen in a CI run): a last line without its newline waits for the
    next read."""
    text = path.read_text() if path.exists() else ""
    return text[: text.rfind("\n") + 1].splitlines()


def ids_after(prefix: str, logs: Sequence[Path]) -> list[str]:
    """The job ids of every line starting with `prefix` ("ran ", "acked "), in all `logs`."""
    return [line.split()[1] for log in logs for line in lines(log) if line.startswith(prefix)]


@asynccontextmanager
async def worker_process(url: str, log: Path, *options: str) -> AsyncIterator[anyio.abc.Process]:
    """A fault worker on `url`, up once it wrote "worker up"; drained (SIGTERM) on exit, killed
    if it does not stop within 15 s. Its output goes to a file beside `log`, never a pipe
    nobody reads (a chatty child would block on a full pipe)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.with_suffix(".stderr").open("wb") as stderr:
        process = await anyio.open_process(
            [sys.executable, "-m", "tests.support.fault_worker", url, str(log), *options],
            cwd=ROOT,
            env=env,
            stdin=None,
            stdout=stderr,
            stderr=stderr,
        )
        try:
            await eventually(lambda: "worker up" in lines(log), within=30)
            yield process
        finally:
            if process.returncode is None:
                process.terminate()
                with anyio.move_on_after(15):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
