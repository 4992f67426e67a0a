"""`db report` is the fix an operator reaches for after a write was refused at `maxmemory`: it
must say the memory is full then. A refused write leaves the server a little under its limit
(the refused command's own buffer is freed), so "full" cannot wait for used >= maxmemory. On a
server of the test's own."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from engine import JobContext, JobRegistry, ManualClock, connect, job
from engine.driver_errors import StorageFullError
from engine.drivers import open_driver
from engine.drivers.base import REPORT, require
from tests.redis.server import own_server
from tests.support.fix_lines import the_line

pytest.importorskip("redis", reason="the redis extra is not installed")

pytestmark = pytest.mark.slow

registry = JobRegistry()
# Room for a few dozen jobs above what an empty server uses.
HEADROOM = 3_000_000


class Padded(BaseModel):
    n: int
    pad: str


@job(idempotency_key=lambda i: str(i.n), registry=registry)
async def padded(input: Padded, ctx: JobContext) -> None:
    return None


async def test_db_report_after_a_write_refused_at_maxmemory_says_the_memory_is_full(
    tmp_path: Path,
) -> None:
    with own_server(tmp_path, **{"maxmemory-policy": "noeviction"}) as server:
        jobs = await connect(server.url, registry=registry, clock=ManualClock())
        client = server.client()
        try:
            used = int(client.info("memory")["used_memory"])
            client.config_set("maxmemory", str(used + HEADROOM))
        finally:
            client.close()
        try:
            with anyio.fail_after(60), pytest.raises(StorageFullError):
                for n in range(HEADROOM // 1_000):
                    await jobs.enqueue(padded, {"n": n, "pad": "x" * 20_000})
        finally:
            await jobs.close()  # the application gave up; an operator runs the report
        driver = open_driver(server.url, clock=ManualClock())  # what `db report` opens
        try:
            lines = (await require(driver, REPORT).server_report()).lines
        finally:
            await driver.close()
        line = the_line(lines, "memory full")
        assert "Raise maxmemory to " in line
