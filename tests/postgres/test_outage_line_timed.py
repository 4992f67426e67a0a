"""A worker's "the database answers again after N s" line (engine/worker_outage.py) is said when
an operation first gets through, and N is the time from the first failure its calls saw.

Before, the line waited for the loop that had failed to run and succeed again: an outbox check
that failed at once was next tried 10 s on, so the line came up to 9 s after the database was
back and said 10 s whatever the outage was; and a call that retried for its whole deadline
before it failed started the outage when it gave up, 10 s after the database went away.

No server here: the Retrier runs operations that fail as a stopped server's do, on one
`ManualClock` (the worker's and the retry clock) that the test moves.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import anyio
import pytest

from engine import ManualClock
from engine.driver_errors import DriverUnavailableError
from engine.drivers.postgres.retry import Retrier
from engine.worker_outage import RUNNING, Outage
from tests.postgres.waiting import pump, pumped

URL = "postgresql://u@127.0.0.1:1/db"
BACK_AT_MS = 4_000  # the server answers again 4 s after it went away
CHECK_FAILED_AT_MS = 2_300  # when a loop that does not retry (an outbox check) failed


def _lost() -> DriverUnavailableError:
    error = DriverUnavailableError("postgres", "cannot reach the server", "fix")
    error.__cause__ = ConnectionRefusedError("connection refused")
    return error


@pytest.fixture
def outage() -> Iterator[Outage]:
    """The record of a running worker, on a clock starting at 0, for this test's tasks."""
    record = Outage(ManualClock(0), "w1", on_answer=lambda: None)
    token = RUNNING.set(record)
    try:
        yield record
    finally:
        RUNNING.reset(token)


def _answers_again(caplog: pytest.LogCaptureFixture) -> list[str]:
    said = (r.getMessage() for r in caplog.records)
    return [line for line in said if line.startswith("worker w1: the database answers again")]


async def test_the_line_is_said_as_an_operation_gets_through_timed_from_its_first_failure(
    outage: Outage, caplog: pytest.LogCaptureFixture
) -> None:
    clock = outage.clock
    assert isinstance(clock, ManualClock)
    retrier = Retrier(URL, deadline_ms=10_000, settle_deadline_ms=300_000, clock=clock)
    tried: list[int] = []
    got_through: list[int] = []
    said_then: list[list[str]] = []

    async def read(first: bool) -> None:
        tried.append(clock.now_ms())
        if clock.now_ms() < BACK_AT_MS:
            raise _lost()
        got_through.append(clock.now_ms())

    async def claim() -> None:  # retrying from the moment the server went away
        await retrier.retrying(read)
        said_then.append(_answers_again(caplog))
        done.set()

    async def outbox_check() -> None:  # fails at once, and runs again only 10 s on
        await clock.sleep_ms(CHECK_FAILED_AT_MS)
        outage.failed("outbox check", _lost())
        outage.answered("lease heartbeat")  # nothing held: it asked nothing, proves nothing

    caplog.set_level(logging.INFO, logger="mcp_jobs.worker")
    done = anyio.Event()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(claim)
            tg.start_soon(outbox_check)
            await pump(clock, done, 50)
    (answered_at,) = got_through
    assert BACK_AT_MS <= answered_at <= BACK_AT_MS + 1_000  # a retry pause is 1 s at most
    # Said as the claim got through, before the outbox check ran again; timed from the claim's
    # first failure, not from the check's.
    assert tried[0] < CHECK_FAILED_AT_MS
    away_ms = answered_at - tried[0]
    expected = f"worker w1: the database answers again after {away_ms / 1000:.1f} s"
    assert said_then == [[expected]], caplog.text
    outage.answered("outbox check")
    assert _answers_again(caplog) == [expected]


async def test_a_call_that_retried_before_it_failed_starts_the_outage_at_its_first_failure(
    outage: Outage, caplog: pytest.LogCaptureFixture
) -> None:
    clock = outage.clock
    assert isinstance(clock, ManualClock)
    retrier = Retrier(URL, deadline_ms=10_000, settle_deadline_ms=300_000, clock=clock)

    tried: list[int] = []

    async def read(first: bool) -> None:
        tried.append(clock.now_ms())
        raise _lost()

    async def claim() -> None:
        try:
            await retrier.retrying(read)
        except DriverUnavailableError as exc:  # after 10 s of retries, from 0
            outage.failed("claim", exc)

    caplog.set_level(logging.INFO, logger="mcp_jobs.worker")
    await pumped(clock, claim, 250)
    assert outage.since == tried[0]
    clock.advance(5_000)
    outage.answered("claim")
    # Before: "after 5.0 s", from when the claim gave up.
    away_ms = clock.now_ms() - tried[0]
    assert away_ms >= 15_000
    assert _answers_again(caplog) == [
        f"worker w1: the database answers again after {away_ms / 1000:.1f} s"
    ]
