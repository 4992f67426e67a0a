"""`mcp-jobs worker` and its signals: the first SIGTERM stops it gracefully and says how long that
may take and how to cut it short; the second hands the jobs back now (Worker.hand_back_now)."""

from __future__ import annotations

import logging
import os
import signal

import anyio
import pytest

from engine import Worker, connect
from engine.testing.blocked import wait_all_tasks_blocked
from mcp_jobs.cli.serve import _stopping, _until_signal


async def test_the_first_signal_stops_gracefully_and_the_second_hands_back() -> None:
    calls: list[str] = []
    stopping = anyio.Event()

    def first() -> None:
        calls.append("stop")
        stopping.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_until_signal, first, lambda: calls.append("now"))
            await wait_all_tasks_blocked()  # its receiver is up: the signal is not Python's
            os.kill(os.getpid(), signal.SIGTERM)
            await stopping.wait()
            assert calls == ["stop"]
            os.kill(os.getpid(), signal.SIGTERM)
    assert calls == ["stop", "now"]  # and the receiver is gone: a third is Python's again


async def test_the_first_signal_says_how_long_the_stop_may_take_and_how_to_cut_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    jobs = await connect("memory://")
    try:
        worker = Worker(jobs, drain_ms=30_000)
        caplog.set_level(logging.INFO)
        _stopping(worker)
    finally:
        await jobs.close()
    (line,) = [r.getMessage() for r in caplog.records if "stopping" in r.getMessage()]
    assert "up to 30 s for 0 job(s) in flight" in line
    assert "a second Ctrl-C (or SIGTERM) hands them back at once" in line
