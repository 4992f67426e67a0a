"""A settle its driver let go (a worker stopped twice) is not said again by `until_written` for
its job: the worker's one line said it for every job. A failure not caused by a let-go is said
once, as before. On PostgreSQL's retrier and on the hold Redis and NATS share, with no server:
the retry clock never moves (a pause not cut short would never end), the jobs' clock is moved
by the test."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
import pytest

from engine.driver_errors import DriverUnavailableError
from engine.drivers.holding import Holds, hold
from engine.drivers.postgres.retry import Retrier
from engine.settle import until_written
from tests.postgres.waiting import CountingClock, eventually

URL = "postgresql://u@127.0.0.1:1/db"
NOT_YET = "is not written yet"


def _lost() -> DriverUnavailableError:
    error = DriverUnavailableError("postgres", "connection lost", "fix")
    error.__cause__ = ConnectionResetError("reset by peer")
    return error


class Held:
    """A settle that never gets through, held as a driver holds it; `let_go` and `close` as
    the driver's."""

    def __init__(self, kind: str, retry: CountingClock) -> None:
        self.tries = 0
        self.closed = False
        self.let_go: Callable[[], int]
        self.settle: Callable[[], Awaitable[None]]
        if kind == "postgres":
            retrier = Retrier(URL, deadline_ms=10_000, settle_deadline_ms=300_000, clock=retry)
            self.let_go, self.close = retrier.let_go, retrier.close
            self.settle = lambda: retrier.resilient(self._away)
        else:
            holds = Holds()
            self.let_go, self.close = holds.let_go, self._closing
            self.settle = lambda: hold(
                lambda: self._away(False),
                within_ms=300_000,
                clock=retry,
                stopped=lambda: self.closed,
                passes=lambda exc: exc.__cause__ is not None,
                driver=kind,
                what="ack of job a",
                holds=holds,
            )

    def _closing(self) -> None:
        self.closed = True

    async def _away(self, first: bool) -> None:
        self.tries += 1
        raise _lost()


async def _written_until_cancelled(
    held: Held, clock: CountingClock, retry: CountingClock, let_go: bool
) -> None:
    """`until_written` of `held`'s settle, through a let-go (or none), and two tries after."""

    async def next_try() -> None:
        await eventually(lambda: clock.waiting == 1)  # failed: it pauses on the jobs' clock
        before = held.tries
        clock.advance(60_000)
        await eventually(lambda: held.tries > before)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(until_written, clock, "job a (finish)", held.settle)
            if let_go:
                await eventually(lambda: retry.waiting == 1)  # held
                assert held.let_go() == 1
            await next_try()
            await next_try()
            await eventually(lambda: clock.waiting == 1)
            tg.cancel_scope.cancel()


@pytest.mark.parametrize("kind", ["postgres", "redis"])
async def test_a_settle_let_go_is_not_said_again_for_its_job(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock, retry = CountingClock(), CountingClock()
    held = Held(kind, retry)
    caplog.set_level(logging.INFO)
    await _written_until_cancelled(held, clock, retry, let_go=True)
    assert not [r for r in caplog.records if NOT_YET in r.getMessage()], caplog.text


@pytest.mark.parametrize("kind", ["postgres", "redis"])
async def test_a_failure_not_let_go_is_said_once_as_before(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock, retry = CountingClock(), CountingClock()
    held = Held(kind, retry)
    held.close()  # closing, not letting go: each try fails at once, said as before
    caplog.set_level(logging.INFO)
    await _written_until_cancelled(held, clock, retry, let_go=False)
    said = [r.getMessage() for r in caplog.records if NOT_YET in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("job a (finish)"), caplog.text
