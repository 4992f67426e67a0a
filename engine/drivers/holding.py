"""Holding a settle (ack, nack, step write) through a server that is away for a while, for the
drivers without a retrier of their own (Redis, NATS; PostgreSQL's is postgres/retry.py).

A body that finished is not run again because its settle met a restart or a dropped
connection: the settle is tried again, 50 ms doubling to 1 s, for up to `within_ms` of the
retry clock. Safe to repeat: every settle is fenced by the lease token and records it as the
settle's (`settled_by`), so a try after one whose reply was lost finds its own settle there and
succeeds without writing again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from engine.clock import Clock, next_retry_pause_ms
from engine.errors import JobsError

T = TypeVar("T")


async def hold(
    settle: Callable[[], Awaitable[T]],
    *,
    within_ms: int,
    clock: Clock,
    stopped: Callable[[], bool],
    passes: Callable[[JobsError], bool],
) -> T:
    """Run `settle`; while it fails with an error that `passes` (an outage, not a refusal),
    run it again until `within_ms` of `clock` have gone by or `stopped()`. The first pause is
    not skipped: the client has just retried at once itself."""
    started = clock.now_ms()
    pause = next_retry_pause_ms(0)
    while True:
        try:
            return await settle()
        except JobsError as exc:
            left = started + within_ms - clock.now_ms()
            if stopped() or not passes(exc) or left <= 0:
                raise
            await clock.sleep_ms(min(pause, left))
            pause = next_retry_pause_ms(pause)
