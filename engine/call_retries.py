"""The retrying one call may do through an outage, over all the operations in it.

A driver retries each operation that is safe to repeat for up to its retry deadline
(`retry_deadline_ms`); a call of several (a cancel that reads the server's clock first, then
records its audit event) waited that deadline out once each. Inside `one_call()` the operations
share one deadline: once one has waited the server out, the rest fail at their first break, and
time spent retrying an operation that got through is counted against the others. `within()`
adds the call's own bound (a wait of `timeout_seconds`): no retry goes past it.
Set by the faces (a tool call); a worker's loops open none, and keep a deadline per operation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from engine.clock import Clock, ServerClock


class CallRetries:
    """What the operations of one call have retried so far, and the bounds it runs under."""

    __slots__ = ("_bounds", "gave_up", "open", "spent_ms")

    def __init__(self) -> None:
        self.spent_ms = 0  # retrying done by the operations that ended, on their retry clocks
        self.gave_up = False  # an operation waited the server out: the rest do not wait again
        self.open = True  # a task the call started and left running is not bound by it
        self._bounds: list[tuple[Clock, int]] = []

    def left_ms(self, deadline_ms: int, retrying_ms: int) -> int:
        """How much longer an operation `retrying_ms` into its retries may go on, for a driver
        whose deadline is `deadline_ms`."""
        left = deadline_ms - self.spent_ms - retrying_ms
        for clock, until in self._bounds:
            left = min(left, until - clock.now_ms())
        return left

    def ended(self, retried_ms: int, gave_up: bool) -> None:
        """An operation that retried for `retried_ms` ended (`gave_up`: failing)."""
        self.spent_ms += max(0, retried_ms)
        self.gave_up = self.gave_up or gave_up


_CALL: ContextVar[CallRetries | None] = ContextVar("mcp_jobs_call_retries", default=None)


def current() -> CallRetries | None:
    """The retrying of the call this task runs for; None outside one (a worker's loops)."""
    call = _CALL.get()
    return call if call is not None and call.open else None


@contextmanager
def one_call() -> Iterator[CallRetries]:
    """Run the block's operations as one call (inside another: the outer call's)."""
    call = current()
    if call is not None:
        yield call
        return
    call = CallRetries()
    token = _CALL.set(call)
    try:
        yield call
    finally:
        call.open = False
        _CALL.reset(token)


@contextmanager
def within(clock: Clock, ms: float) -> Iterator[CallRetries]:
    """As `one_call()`, and no retry goes on past `ms` of `clock` from now."""
    # Durations on the machine's own clock: a server clock moves when it is measured again.
    while isinstance(clock, ServerClock):
        clock = clock.local
    with one_call() as call:
        bound = (clock, clock.now_ms() + max(0, int(ms)))
        call._bounds.append(bound)
        try:
            yield call
        finally:
            call._bounds.remove(bound)
