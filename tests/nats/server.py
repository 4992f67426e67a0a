"""A nats-server the tests start and stop themselves: a free loopback port, a temporary store
directory, JetStream on; optionally one node of a local cluster (`routes`), or JetStream limits
(`jetstream`, e.g. `max_file_store: 64KB`) written to a config file, or a `login` it asks
every client for."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.ports import free_port

BINARY_ENV = "MCP_JOBS_TEST_NATS_SERVER"
READY_TIMEOUT_S = 20.0


def server_binary() -> str | None:
    """The nats-server to run: $MCP_JOBS_TEST_NATS_SERVER, else on PATH or in /usr/sbin."""
    named = os.environ.get(BINARY_ENV)
    if named:
        return named if Path(named).exists() else None
    return shutil.which("nats-server") or (
        "/usr/sbin/nats-server" if Path("/usr/sbin/nats-server").exists() else None
    )


NO_BINARY = "no nats-server binary (apt-get install nats-server, or set MCP_JOBS_TEST_NATS_SERVER)"


def binary_or_skip() -> str:
    """The nats-server to run, or the test skipped saying how to get one."""
    found = server_binary()
    if found is None:
        pytest.skip(NO_BINARY)
    return found


@dataclass
class NatsServer:
    binary: str
    store_dir: Path
    port: int = field(default_factory=free_port)
    cluster_port: int | None = None
    routes: list[int] = field(default_factory=list[int])
    name: str = "n"
    # Lines for the config file's jetstream block (the command line has no flag for limits).
    jetstream: str = ""
    # A user and password every client must give (--user / --pass).
    login: tuple[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        args = [self.binary, "-js", "-a", "127.0.0.1", "-p", str(self.port)]
        args += ["-sd", str(self.store_dir), "-n", self.name]
        if self.login is not None:
            args += ["--user", self.login[0], "--pass", self.login[1]]
        if self.jetstream:
            config = self.store_dir.parent / f"{self.name}.conf"
            config.write_text(f"jetstream {{\n  {self.jetstream}\n}}\n")  # the flags name the rest
            args += ["-c", str(config)]
        if self.cluster_port is not None:
            args += [
                "--cluster_name",
                "mcpjobs",
                "--cluster",
                f"nats://127.0.0.1:{self.cluster_port}",
            ]
            routes = ",".join(f"nats://127.0.0.1:{p}" for p in self.routes)
            args += ["--routes", routes]
        log_path = self.store_dir.parent / f"{self.name}.log"
        with log_path.open("ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"nats-server exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"nats-server did not listen on {self.port}")

    def kill(self) -> None:
        """SIGKILL: no flush, no goodbye, as a crashed machine's process."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
