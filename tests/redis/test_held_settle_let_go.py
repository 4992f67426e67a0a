"""Held settles let go (engine/drivers/holding.py `Holds.let_go`, shared by Redis and NATS; a
worker stopped twice): each fails at its next try, says so on its failure and logs no line of
its own, and a settle that fails from then on is not held, while one that gets through at its
first try still answers. The retry clock never moves: a pause not cut short would never end."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
import pytest

from engine.driver_errors import DriverUnavailableError
from engine.drivers.holding import Holds, hold, was_let_go
from engine.errors import JobsError
from tests.postgres.waiting import CountingClock, eventually


def _held(
    settle: Callable[[], Awaitable[str]], holds: Holds, clock: CountingClock, passes: bool = True
) -> Awaitable[str]:
    return hold(
        settle,
        within_ms=300_000,
        clock=clock,
        stopped=lambda: False,
        passes=lambda exc: passes and isinstance(exc, DriverUnavailableError),
        driver="redis",
        what="ack of job a",
        holds=holds,
    )


def _ends(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "engine.drivers.holding"
        and "held" in r.getMessage()
        and "is held" not in r.getMessage()
    ]


async def test_let_go_ends_a_held_settle_at_its_next_try_with_no_line_of_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = CountingClock()
    holds = Holds()
    tries = 0

    async def away() -> str:
        nonlocal tries
        tries += 1
        raise DriverUnavailableError("redis", "ConnectionError: the server went away")

    failed: list[JobsError] = []

    async def held() -> None:
        try:
            await _held(away, holds, clock)
        except DriverUnavailableError as exc:
            failed.append(exc)

    caplog.set_level(logging.INFO)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(held)
            await eventually(lambda: clock.waiting == 1)  # held; its pause's clock never moves
            before = tries
            assert holds.let_go() == 1
    assert len(failed) == 1 and was_let_go(failed[0]) and holds.held == 0
    assert tries == before + 1  # one try more, at once, and no pause after it
    assert not _ends(caplog), caplog.text  # the caller's one line says it for them all

    # From then on a settle that fails is not held: it fails at its first try.
    tries = 0
    with anyio.fail_after(10), pytest.raises(DriverUnavailableError) as raised:
        await _held(away, holds, clock)
    assert tries == 1 and was_let_go(raised.value)
    # A refusal is no outage: it is not said to be let go (its caller says it as before).
    with anyio.fail_after(10), pytest.raises(DriverUnavailableError) as refused:
        await _held(away, holds, clock, passes=False)
    assert not was_let_go(refused.value)

    # The connections stay: a settle that gets through at its first try is answered.
    async def written() -> str:
        return "written"

    assert await _held(written, holds, clock) == "written"
