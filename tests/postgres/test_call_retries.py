"""One call's operations retry through an outage for one retry deadline in all, and never past
the call's own bound (engine/call_retries.py, read by the Retrier): a tool call whose two reads
each retried for a whole deadline answered after two.

No server here: operations fail as a stopped server's do, on a `ManualClock` the test moves.
"""

from __future__ import annotations

import pytest

from engine import ManualClock
from engine.call_retries import one_call, within
from engine.driver_errors import DriverUnavailableError
from engine.drivers.postgres.retry import Retrier
from tests.postgres.waiting import pumped

URL = "postgresql://u@127.0.0.1:1/db"
DEADLINE_MS = 10_000
STEP_MS = 250


def _lost() -> DriverUnavailableError:
    error = DriverUnavailableError("postgres", "cannot reach the server", "fix")
    error.__cause__ = ConnectionRefusedError("connection refused")
    return error


class Server:
    """Operations on a server that answers again at `back_at` of `clock` (never: None)."""

    def __init__(self, clock: ManualClock, back_at: int | None) -> None:
        self.clock = clock
        self.back_at = back_at
        self.tries: list[int] = []

    async def read(self, first: bool) -> str:
        self.tries.append(self.clock.now_ms())
        if self.back_at is None or self.clock.now_ms() < self.back_at:
            raise _lost()
        return "read"


def _retrier(clock: ManualClock) -> Retrier:
    return Retrier(URL, deadline_ms=DEADLINE_MS, settle_deadline_ms=300_000, clock=clock)


async def test_the_operations_of_one_call_retry_for_one_deadline_in_all() -> None:
    clock = ManualClock(0)
    retrier = _retrier(clock)
    first = Server(clock, back_at=4_000)
    away = Server(clock, back_at=None)
    later = Server(clock, back_at=None)
    with one_call():
        assert await pumped(clock, lambda: retrier.retrying(first.read), STEP_MS) == "read"
        retried_ms = first.tries[-1] - first.tries[0]
        with pytest.raises(DriverUnavailableError) as gave_up:
            await pumped(clock, lambda: retrier.retrying(away.read), STEP_MS)
        # What the first left of the deadline, not a whole one more (before: 10 s).
        assert gave_up.value.details is not None
        tried_ms = gave_up.value.details["tried_ms"]
        assert DEADLINE_MS - retried_ms <= tried_ms <= DEADLINE_MS - retried_ms + STEP_MS
        # The call has waited the server out: the next operation fails at its first break.
        with pytest.raises(DriverUnavailableError):
            await pumped(clock, lambda: retrier.retrying(later.read), STEP_MS)
        assert len(later.tries) == 1
    # The next call has a whole deadline again.
    again = Server(clock, back_at=None)
    began = clock.now_ms()
    with one_call(), pytest.raises(DriverUnavailableError):
        await pumped(clock, lambda: retrier.retrying(again.read), STEP_MS)
    assert clock.now_ms() - began >= DEADLINE_MS


async def test_a_bound_stops_retries_but_a_stale_connection_or_a_held_settle_goes_on() -> None:
    clock = ManualClock(0)
    retrier = _retrier(clock)

    async def once_stale(first: bool) -> str:
        if first:  # a connection the server closed (a restart); the next one is fresh
            raise _lost()
        return "read"

    with within(clock, 0):
        assert await pumped(clock, lambda: retrier.retrying(once_stale), STEP_MS) == "read"
        away = Server(clock, back_at=None)
        with pytest.raises(DriverUnavailableError):
            await pumped(clock, lambda: retrier.retrying(away.read), STEP_MS)
        # Once more at once, and no pause (before: for 10 s).
        assert len(away.tries) == 2 and away.tries[0] == away.tries[1]
    began = clock.now_ms()
    with within(clock, 3_000):
        late = Server(clock, back_at=None)
        with pytest.raises(DriverUnavailableError):
            await pumped(clock, lambda: retrier.retrying(late.read), STEP_MS)
    assert 3_000 <= late.tries[-1] - began <= 3_000 + STEP_MS  # the last try at the bound

    # A held settle keeps its own deadline inside a bounded call.
    settle = Server(clock, back_at=clock.now_ms() + 15_000)
    with within(clock, 0):
        assert await pumped(clock, lambda: retrier.resilient(settle.read), 500) == "read"
