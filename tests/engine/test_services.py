"""A background service's pass that fails (engine/services.py) is logged and tried again at the
next: it never ends the worker that runs the service, which would stop its jobs too."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from anyio.lowlevel import checkpoint

from engine import Jobs, ManualClock, OutboxRelay, Scheduler
from engine.errors import DriverUnavailableError
from engine.pruner import Pruner
from engine.testing.blocked import wait_all_tasks_blocked

Service = Scheduler | OutboxRelay | Pruner
SERVICES: dict[str, tuple[Callable[[Jobs], Service], str]] = {
    "scheduler": (Scheduler, "round"),
    "outbox relay": (OutboxRelay, "pass_once"),
    "pruner": (Pruner, "pass_once"),
}


@pytest.mark.parametrize("name", list(SERVICES))
@pytest.mark.parametrize(
    ("failure", "logged"),
    [
        (RuntimeError("a defect"), "failed unexpectedly, retrying"),
        (DriverUnavailableError("memory", "away"), "failed, retrying: DRIVER_UNAVAILABLE"),
    ],
)
async def test_a_failed_pass_is_logged_and_the_next_one_runs(
    jobs: Jobs,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    failure: Exception,
    logged: str,
) -> None:
    make, method = SERVICES[name]
    service = make(jobs)
    passes = 0

    async def fails_once() -> None:
        nonlocal passes
        passes += 1
        await checkpoint()
        if passes == 1:
            raise failure
        service.stop()

    monkeypatch.setattr(service, method, fails_once)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(service.run)
            await wait_all_tasks_blocked()  # the first pass failed; the service waits
            assert passes == 1
            clock.advance(24 * 3_600_000)  # past any service's wait
            await service.wait_stopped()
    assert passes == 2
    assert logged in caplog.text, caplog.text
