"""A bucket whose stream an operator capped (`max_bytes`, discard new) refuses every write when
it reaches the cap. The refusal said "the disk or volume holding the JetStream store … is
full", though no disk was, and its fix (`db nats-report`) printed the stream's numbers and no
step to take. The cause now names the stream and its own limit, the report a line that raises
it (through nats-py, no `nats` CLI needed) or frees room, and that line, run as given, makes
room for the write refused."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import anyio
import pytest

from engine import ManualClock
from engine.drivers import open_driver
from engine.errors import JobsError
from schemas.jobs import EnqueueRequest

pytest.importorskip("nats", reason="the nats extra is not installed")

import nats
from nats.js.api import KeyValueConfig

from engine.drivers.nats.report import report

CAP = 8_192
FILL_AT_MOST = 200
FIX_TIMEOUT_S = 60


def _request(n: int, now: int) -> EnqueueRequest:
    return EnqueueRequest(
        id=f"{0:016x}{n:016x}",
        run_id=f"{1:016x}{n:016x}",
        name="work",
        queue="default",
        idempotency_key=f"k{n}",
        input={"n": n, "pad": "p" * 400},
        max_attempts=3,
        run_at=now,
    )


async def _run_as_given(line: str) -> str:
    """`line` through a shell from another directory, the project's bin alone on PATH."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    env["HOME"] = os.environ.get("HOME", "/root")
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    with tempfile.TemporaryDirectory() as elsewhere, anyio.fail_after(FIX_TIMEOUT_S):
        ran = await anyio.run_process(["bash", "-c", line], cwd=elsewhere, env=env, check=False)
    assert ran.returncode == 0, ran.stderr.decode()
    return ran.stdout.decode()


async def test_a_capped_stream_names_its_limit_and_the_line_that_raises_it(
    database_url: str,
) -> None:
    server, _, bucket = database_url.rpartition("/")
    client = await nats.connect(server)
    try:
        config = KeyValueConfig(bucket=bucket, history=1, max_bytes=CAP, direct=False)
        await client.jetstream().create_key_value(config)
    finally:
        await client.close()
    clock = ManualClock()
    driver = open_driver(database_url, clock=clock)
    try:
        await driver.migrate()
        with pytest.raises(JobsError) as raised:
            for n in range(1, FILL_AT_MOST):
                await driver.enqueue([_request(n, clock.now_ms())])
        refused = raised.value
        n_refused = n
        assert refused.code == "STORAGE_FULL"
        assert "disk or volume" not in refused.cause, refused.cause
        assert f"stream KV_{bucket}" in refused.cause and "max_bytes" in refused.cause

        lines = await report(database_url, None)
        (full,) = [line for line in lines if line.startswith(f"stream KV_{bucket} is full")]
        raise_line = full.split(": ", 1)[1].split("; or free room", 1)[0]
        raise_line = raise_line.split("Raise it to ", 1)[1].split(": ", 1)[1]
        printed = await _run_as_given(raise_line)
        assert f"KV_{bucket} max_bytes {2 * CAP}" in printed

        # Followed once: the write refused goes in.
        await driver.enqueue([_request(n_refused, clock.now_ms())])
    finally:
        await driver.close()
