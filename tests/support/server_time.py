"""Two machines on one database, one whose clock is set wrong: what each driver that reads the
server's time must keep (a lease held on either is not over on the other; a job the wrong one
enqueues to run now is due now on the other; the offset is logged)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from engine.clock import SystemClock
from engine.drivers.base import Driver
from schemas.jobs import EnqueueRequest

SKEW_MS = 120_000
# Two readings of the server's time through this machine: apart by the calls between them
# and half of each measure's round trip, never by anything near the skew.
AGREE_MS = 5_000


class SkewedClock(SystemClock):
    """This machine's clock, set `skew_ms` wrong (what NTP left undone on one machine)."""

    def __init__(self, skew_ms: int) -> None:
        self.skew_ms = skew_ms

    def now_ms(self) -> int:
        return super().now_ms() + self.skew_ms


async def check_wrong_clock_keeps_servers_time(
    honest: Driver,
    skewed: Driver,
    skew_ms: int,
    request: Callable[[int, int], EnqueueRequest],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`skewed` runs on a clock `skew_ms` off; both are open on the same empty store.
    `request(n, now)`: the n-th job's request, due at `now`."""
    await honest.migrate()
    with caplog.at_level(logging.WARNING):
        await skewed.migrate()
    side = "ahead of" if skew_ms > 0 else "behind"
    seconds = f"{abs(skew_ms) / 1000:.1f}"
    assert f"clock reads {seconds} s {side} the database server's" in caplog.text, caplog.text
    assert abs(skewed.clock.now_ms() - honest.clock.now_ms()) < AGREE_MS

    # Each job is due a little before its enqueuer's now: the two machines' readings of the
    # server's clock agree to within AGREE_MS, not to the millisecond.
    (held,) = await honest.enqueue([request(1, honest.clock.now_ms() - AGREE_MS)])
    (claimed,) = await honest.claim("honest", 1, 30_000)
    assert claimed.record.id == held.id
    assert await skewed.claim("skewed", 10, 30_000) == []
    (mine,) = await honest.enqueue([request(2, honest.clock.now_ms() - AGREE_MS)])
    (claimed,) = await skewed.claim("skewed", 1, 30_000)
    assert claimed.record.id == mine.id
    assert await honest.claim("honest", 10, 30_000) == []
    (due,) = await skewed.enqueue([request(3, skewed.clock.now_ms() - AGREE_MS)])
    assert [c.record.id for c in await honest.claim("honest", 10, 30_000)] == [due.id]
