"""Starting a benchmark child process and reading its JSON-lines protocol, with deadlines."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

REPO_ROOT = Path(__file__).resolve().parent.parent


class ChildFailedError(Exception):
    """A child exited, or missed its deadline, without reporting a result."""

    def __init__(self, what: str, log: Path) -> None:
        tail = ""
        with contextlib.suppress(OSError):
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        super().__init__(f"{what} (log {log}):\n{tail}")
        self.log = log


class Child:
    """One `python -m benchmarks.child` process."""

    def __init__(
        self, spec: dict[str, Any], log: Path, *, wrap: Sequence[str] = (), python: str = ""
    ) -> None:
        self.spec = spec
        self.log = log
        self.wrap = list(wrap)
        self.python = python or sys.executable
        self._proc: asyncio.subprocess.Process | None = None
        self._log_file: TextIO | None = None

    async def start(self) -> Child:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log.open("a")
        self._log_file.write(f"== {json.dumps(self.spec)}\n")
        self._log_file.flush()
        self._proc = await asyncio.create_subprocess_exec(
            *self.wrap,
            self.python,
            "-m",
            "benchmarks.child",
            json.dumps(self.spec),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._log_file,
            cwd=str(REPO_ROOT),
            env=env,
        )
        return self

    async def _next_event(self) -> dict[str, Any] | None:
        proc = self._proc
        if proc is None or proc.stdout is None:
            raise RuntimeError("child not started")
        while True:
            line = await proc.stdout.readline()
            if not line:
                return None
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a wrapper (py-spy) talking on stdout
            if isinstance(message, dict) and "event" in message:
                return message

    async def wait_for(self, event: str, limit_s: float) -> dict[str, Any]:
        try:
            async with asyncio.timeout(limit_s):
                while True:
                    message = await self._next_event()
                    if message is None:
                        await self._reap()
                        raise ChildFailedError(
                            f"{self.spec['system']} {self.spec['role']} exited before '{event}'",
                            self.log,
                        )
                    if message["event"] == event:
                        return message
        except TimeoutError:
            await self.kill()
            raise ChildFailedError(
                f"{self.spec['system']} {self.spec['role']}: no '{event}' within {limit_s:.0f} s",
                self.log,
            ) from None

    async def result(self, limit_s: float) -> dict[str, Any]:
        message = await self.wait_for("result", limit_s)
        await self._reap()
        message.pop("event", None)
        return message

    async def _reap(self) -> None:
        if self._proc is not None:
            try:
                async with asyncio.timeout(30):
                    await self._proc.wait()
            except TimeoutError:
                await self.kill()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    async def kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            await self._proc.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


async def run_child(
    spec: dict[str, Any], log: Path, limit_s: float, *, wrap: Sequence[str] = ()
) -> dict[str, Any]:
    """Start a child and wait for its result."""
    child = await Child(spec, log, wrap=wrap).start()
    try:
        return await child.result(limit_s)
    finally:
        await child.kill()
