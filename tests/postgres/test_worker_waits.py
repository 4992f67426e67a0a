"""A worker started before its database answers waits for it, as a running worker rides out an
outage: it logs each try and runs jobs once the server answers. Before, it exited at once with
DRIVER_UNAVAILABLE (compose and systemd start the two side by side)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import pytest
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

import examples.shop
from engine import connect
from tests.support.ports import free_port


async def _pump(source: SocketStream, sink: SocketStream) -> None:
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
        async for chunk in source:
            await sink.send(chunk)
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await sink.send_eof()


async def _line(log: BufferedByteReceiveStream, wanted: Any) -> dict[str, Any]:
    while True:
        raw = await log.receive_until(b"\n", 1 << 20)
        with suppress(ValueError):
            record: dict[str, Any] = json.loads(raw)
            if wanted(record):
                return record


@pytest.mark.slow
async def test_a_worker_started_before_its_database_answers_waits_and_then_runs(
    pg_url: str, tmp_path: Path
) -> None:
    target = urlsplit(pg_url)
    port = free_port()
    proxied = urlunsplit(
        target._replace(netloc=target.netloc.replace(f":{target.port}", f":{port}"))
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_JOBS_", "SHOP_"))}
    env |= {"PYTHONUNBUFFERED": "1", "SHOP_DB": str(tmp_path / "shop.db")}
    argv = [sys.executable, "-m", "mcp_jobs.cli", "worker", "--app", "examples.shop"]
    argv += ["--database-url", proxied, "--queues", "emails", "--log-format", "json"]
    argv += ["--log-level", "DEBUG"]  # job.succeeded is a DEBUG line

    async def forward(client: SocketStream) -> None:
        upstream = await anyio.connect_tcp(target.hostname or "", target.port or 0)
        async with client, upstream, anyio.create_task_group() as tg:
            tg.start_soon(_pump, client, upstream)
            tg.start_soon(_pump, upstream, client)

    async def proxy() -> None:
        async with await anyio.create_tcp_listener(
            local_host="127.0.0.1", local_port=port
        ) as listener:
            await listener.serve(forward)

    jobs = await connect(pg_url)
    process = await anyio.open_process(argv, cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                assert process.stderr is not None
                log = BufferedByteReceiveStream(process.stderr)
                waiting = await _line(log, lambda r: "does not answer" in r["message"])
                assert "trying again in" in waiting["message"] and process.returncode is None
                tg.start_soon(proxy)
                await _line(log, lambda r: r["message"].startswith("worker "))
                assert examples.shop.send_receipt is not None  # declared in this process too
                made = await jobs.enqueue(
                    "send_receipt", {"order_id": 7, "email": "a@b.example"}, tenant_id="acme"
                )
                await _line(
                    log,
                    lambda r: (
                        r["message"] == "job.succeeded"
                        and r.get("job", {}).get("job_id") == made.id
                    ),
                )
                process.send_signal(signal.SIGTERM)
                assert await process.wait() == 0
                tg.cancel_scope.cancel()
        assert (await jobs.get(made.id)).state == "done"
    finally:
        if process.returncode is None:  # a failed check: the worker must not outlive the test
            process.kill()
        await process.aclose()
        await jobs.close()


async def test_a_worker_whose_url_names_a_database_the_server_lacks_stops_at_once(
    pg_url: str, tmp_path: Path
) -> None:
    """No wait helps a database that does not exist: the start stops with the typed error."""
    target = urlsplit(pg_url)
    missing = urlunsplit(target._replace(path=f"/no_such_db_{os.urandom(4).hex()}"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_JOBS_", "SHOP_"))}
    env |= {"SHOP_DB": str(tmp_path / "shop.db")}
    argv = [sys.executable, "-m", "mcp_jobs.cli", "worker", "--app", "examples.shop"]
    argv += ["--database-url", missing]
    with anyio.fail_after(60):
        done = await anyio.run_process(argv, cwd=tmp_path, env=env, check=False)
    said = done.stderr.decode()
    assert done.returncode == 1, said
    assert "error DATABASE_URL_INVALID" in said and "does not exist" in said
    assert "does not answer" not in said
