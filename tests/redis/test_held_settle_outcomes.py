"""A held settle of many jobs (an ack of a batch, a batch of step writes) is answered job by job:
the line that ends the hold says how many were written and how many refused, and why, not "is
written" when the server refused them (engine/drivers/holding.py, which Redis and NATS share)."""

from __future__ import annotations

import logging

import pytest

from engine.driver_errors import DriverUnavailableError
from engine.drivers.holding import hold
from engine.drivers.job_gone import JobGoneError
from engine.errors import JobsError, JobSlotLostError
from tests.support.paced_clock import PacedClock


async def _held(answer: list[JobsError | None]) -> list[JobsError | None]:
    tries = 0

    async def settle() -> list[JobsError | None]:
        nonlocal tries
        tries += 1
        if tries == 1:
            raise DriverUnavailableError("redis", "ConnectionError: the server went away")
        return answer

    return await hold(
        settle,
        within_ms=60_000,
        clock=PacedClock(),
        stopped=lambda: False,
        passes=lambda exc: isinstance(exc, DriverUnavailableError),
        driver="redis",
        what="ack of 3 jobs (a, b, c)",
    )


def _ended(caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    held = [r for r in caplog.records if r.name == "engine.drivers.holding"]
    assert len(held) == 2, caplog.text  # one when it starts, one when it ends
    return held[1]


async def test_a_held_ack_refused_in_part_says_what_was_written_and_why_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    answer: list[JobsError | None] = [None, JobGoneError("b"), JobSlotLostError("c")]
    assert await _held(answer) == answer
    ended = _ended(caplog)
    assert ended.levelno == logging.WARNING
    assert ended.getMessage().endswith(
        "held 0.1 s is answered: written 1, refused 2 (job gone: 1, lease lost: 1)"
    )


async def test_a_held_ack_written_whole_says_it_is_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    assert await _held([None, None, None]) == [None, None, None]
    ended = _ended(caplog)
    assert ended.levelno == logging.INFO and ended.getMessage().endswith("is written")
