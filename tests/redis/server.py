"""A redis-server a test starts, stops and kills itself (never the shared dev server): a free
loopback port, a temporary directory, and the persistence and memory settings the test names.
Skips, with the reason, when no redis-server binary is installed."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.ports import free_port

pytest.importorskip("redis", reason="the redis extra is not installed")

from redis import Redis
from redis.exceptions import RedisError

READY_TIMEOUT_S = 20.0


class RedisServer:
    """`options`: redis-server's own (`appendonly`, `save`, `maxmemory`…), over these defaults:
    no AOF and no RDB save points, so a restart keeps nothing unless the test asks for it."""

    def __init__(self, directory: Path, **options: str) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.options = {
            "port": str(self.port),
            "bind": "127.0.0.1",
            "dir": str(directory),
            "appendonly": "no",
            "save": "",
            "daemonize": "no",
            **options,
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not on PATH")
        log = (self.directory / "redis.log").open("ab")  # a file, never an unread pipe
        args = [part for k, v in self.options.items() for part in (f"--{k}", v)]
        self.process = subprocess.Popen([binary, *args], stdout=log, stderr=log)
        log.close()
        self.wait_ready()

    def wait_ready(self) -> None:
        """Until PING answers (after the AOF is loaded). Bounded polling, synchronous: the
        test's event loop has nothing to do meanwhile."""
        client = Redis(port=self.port, socket_connect_timeout=0.5, socket_timeout=0.5)
        deadline = time.monotonic() + READY_TIMEOUT_S
        try:
            while True:
                assert self.process is not None and self.process.poll() is None, "server died"
                try:
                    if client.ping():
                        return
                except RedisError:
                    pass
                assert time.monotonic() < deadline, "redis-server not up in time"
                time.sleep(0.02)
        finally:
            client.close()

    def pause(self) -> None:
        """SIGSTOP: the server keeps its connections and answers nothing (a hung server)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: what survives is what the server's persistence wrote."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused one too
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def client(self) -> Redis:
        return Redis(port=self.port, decode_responses=True, socket_timeout=5)


@contextmanager
def own_server(tmp_path: Path, **options: str) -> Iterator[RedisServer]:
    directory = tmp_path / "redis"
    directory.mkdir(exist_ok=True)
    server = RedisServer(directory, **options)
    server.start()
    try:
        yield server
    finally:
        server.kill()
