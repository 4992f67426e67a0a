"""A worker stopped twice while its database is away ends within a bound (HAND_BACK_MS on its own
clock), not when the database returns: the settles it held are let go, said in one line, and
their jobs are taken over once their leases run out.

The server really stops (`pg_ctl stop`, the test server's, as in tests/postgres/test_outage.py);
the jobs' clock and the retry clock are the test's, and only the jobs' clock is moved: a wait
on the retry clock (a held settle, a retry deadline) would never end. Every wait is on an
observable condition and bounded.
"""

from __future__ import annotations

import logging

import anyio
import pytest

from engine import ManualClock
from engine.driver_errors import DriverUnavailableError
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.retry import Retrier
from tests.postgres.test_faults import _pg_ctl_command, pg_ctl
from tests.postgres.test_outage import _server_up_after
from tests.postgres.waiting import CountingClock, eventually
from tests.support.second_stop import Outage, stopped_twice_in_an_outage

__all__ = ["_server_up_after"]  # autouse: however a test here ends, the next finds the server up

URL = "postgresql://u@127.0.0.1:1/db"


def _lost() -> DriverUnavailableError:
    error = DriverUnavailableError("postgres", "connection lost", "fix")
    error.__cause__ = ConnectionResetError("reset by peer")
    return error


async def test_let_go_ends_a_held_settle_at_its_next_try_with_no_line_of_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = CountingClock()
    retrier = Retrier(URL, deadline_ms=10_000, settle_deadline_ms=300_000, clock=clock)
    tries: list[bool] = []

    async def settle(first: bool) -> None:
        tries.append(first)
        raise _lost()

    failed: list[DriverUnavailableError] = []

    async def held() -> None:
        try:
            await retrier.resilient(settle)
        except DriverUnavailableError as exc:
            failed.append(exc)

    caplog.set_level(logging.INFO)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(held)
            await eventually(lambda: clock.waiting == 1)  # held; its pause's clock never moves
            before = len(tries)
            assert retrier.let_go() == 1
    assert len(failed) == 1 and retrier.holding == 0
    assert len(tries) == before + 1  # one try more, at once, and no pause after it
    # The caller's one line says it for every hold let go: none of its own.
    assert not _hold_ends(caplog), caplog.text
    # Once let go, a retry fails at its first break rather than waiting out its deadline.
    tries.clear()
    with anyio.fail_after(10), pytest.raises(DriverUnavailableError):
        await retrier.retrying(settle)
    assert tries == [True]


def _hold_ends(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The lines of holds that ended unwritten, each its own (engine/drivers/holding.py)."""
    return [
        r
        for r in caplog.records
        if r.name == "engine.drivers.holding" and "is not written" in r.getMessage()
    ]


@pytest.mark.slow
async def test_a_worker_stopped_twice_in_an_outage_ends_within_its_bound_and_leases_hand_on(
    pg_url: str, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    _pg_ctl_command("stop")  # skips here when the server cannot be driven
    # The retry clock never moves: a held settle waits on it for good.
    driver = PostgresDriver(pg_url, clock=clock, retry_clock=CountingClock(), listen=False)

    async def stop() -> None:
        await pg_ctl("stop", "-m", "fast")

    async def restart() -> None:
        await pg_ctl("restart")

    outage = Outage(
        driver,
        clock,
        held=lambda: driver.db.retry.holding,
        stop=stop,
        restart=restart,
        other=lambda: PostgresDriver(pg_url, clock=clock, listen=False),
    )
    await stopped_twice_in_an_outage(outage, caplog)  # the server is up after: _server_up_after
