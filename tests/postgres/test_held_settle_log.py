"""A settle PostgreSQL's retrier holds through a lost connection says so: one warning line when
the hold starts and one line when it is written, not a line a try. No server: the settle is a
function that fails as a lost connection does, on a retry clock the test moves."""

from __future__ import annotations

import logging

import pytest

from engine.driver_errors import DriverUnavailableError
from engine.drivers.postgres.retry import Retrier
from tests.support.paced_clock import PacedClock


async def test_a_held_settle_logs_one_line_as_it_starts_and_one_when_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    retrier = Retrier(
        "postgresql://u@127.0.0.1:1/db",
        deadline_ms=10_000,
        settle_deadline_ms=300_000,
        clock=PacedClock(),
    )
    tries: list[bool] = []

    async def settle(first: bool) -> str:
        tries.append(first)
        if len(tries) <= 5:
            error = DriverUnavailableError("postgres", "connection lost", "fix")
            error.__cause__ = ConnectionResetError("reset by peer")
            raise error
        return "written"

    caplog.set_level(logging.INFO)
    assert await retrier.resilient(settle) == "written"
    assert len(tries) == 6
    held = [r for r in caplog.records if "held" in r.getMessage()]
    assert [r.levelno for r in held] == [logging.WARNING, logging.INFO], caplog.text
    assert "is written" in held[1].getMessage()
