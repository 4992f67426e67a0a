"""Retrying through a broken connection or a short outage, and holding settles through a long one.

`retrying` re-runs an operation that is safe to repeat for up to `retry_deadline_ms`;
`resilient` holds a settle for up to `settle_retry_ms` (its lease token decides, once a try gets
through, whether it still counts); `flush_held` lets the held settles through before a claim.
`let_go` ends the holds and retries at once, for a process on its way out (a worker stopped
twice): what they carried is left to the jobs' leases. A transaction the server rolled back (a
deadlock, a serialization failure) is run again by both for up to `retry_deadline_ms`: a
conflict is not an outage, and no settle is held for it.
`rolled_back_again` runs again only such a transaction, for operations that must not run twice
(a cancel, a prune): nothing of a rolled-back one was written, while a broken try may have been.
The operations of one call (engine/call_retries.py: a tool call) share one `retry_deadline_ms`
and retry no longer than the call's own bound (a wait's); a held settle keeps its own deadline.
Each success is said to the running worker's outage record (engine/worker_outage.py).
Deadlines and pauses read `clock`, a monotonic clock a test can replace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from engine.call_retries import current
from engine.clock import Clock, next_retry_pause_ms
from engine.driver_errors import DriverUnavailableError
from engine.drivers.holding import hold_ended, hold_started, mark_let_go
from engine.drivers.postgres.faults import (
    connection_lost,
    is_connection_failure,
    is_retried,
    is_rolled_back,
)
from engine.drivers.urls import report_fix
from engine.worker_outage import noted_answer

T = TypeVar("T")

# The first retry through a lost connection goes at once (most often one stale connection,
# and a fresh one just works); then the pauses of `next_retry_pause_ms`.


class Retrier:
    """The retry and hold policy of one driver (see the module doc)."""

    def __init__(
        self, url: str, *, deadline_ms: int, settle_deadline_ms: int, clock: Clock
    ) -> None:
        self._url = url
        self.deadline_ms = deadline_ms
        self._settle_deadline_ms = settle_deadline_ms
        self.clock = clock
        self._closed = False
        # Set by `let_go`: the holds it ended are said in its caller's one line, not one each.
        self._let_go = False
        # Settles held through a lost connection: how many, the pauses of retries (which
        # `flush_held` cuts short), the event each held try sets, and its last failure.
        self.holding = 0
        self._pausing: set[anyio.CancelScope] = set()
        self._held_tried = asyncio.Event()
        self._held_failure: DriverUnavailableError | None = None

    async def retrying(self, op: Callable[[bool], Awaitable[T]]) -> T:
        """Run `op(first_try)`; through a broken connection or an unreachable server, run it
        again, pausing between tries, for up to `retry_deadline_ms`. Only for operations whose
        second run changes nothing the first did not (a later try may find what an earlier,
        broken one committed)."""
        return await self._retry(op, self.deadline_ms, held=False)

    async def resilient(
        self, op: Callable[[bool], Awaitable[T]], what: str = "settle (ack, nack or step write)"
    ) -> T:
        """Run the settle `op(first_try)`; while the server cannot be reached, hold it and run
        it again (`first_try=False`, so it can check whether a broken try committed) for up to
        `settle_retry_ms`. Its fence (the lease token) decides once a try gets through: no
        other worker can take the job while the server is unreachable, and none that saw the
        outage takes it over for a lease after (`claim`), so the settle still counts. A hold
        logs one line as it starts and one as it ends (`what` names the settle)."""
        return await self._retry(op, self._settle_deadline_ms, held=True, what=what)

    async def rolled_back_again(self, op: Callable[[], Awaitable[T]]) -> T:
        """Run `op()`, one transaction; when the server rolled it back, run it again, pausing
        between tries, for up to `retry_deadline_ms`. Not through a broken connection: that try
        may have committed, and `op` is one whose second run would act twice."""

        async def once(first: bool) -> T:
            return await op()

        return await self._retry(once, self.deadline_ms, held=False, lost_too=False)

    async def _retry(
        self,
        op: Callable[[bool], Awaitable[T]],
        deadline_ms: int,
        held: bool,
        lost_too: bool = True,
        what: str = "",
    ) -> T:
        clock = self.clock
        begun = clock.now_ms()
        started = 0
        pause = 0
        tries = 0
        holding = False
        failure: BaseException | None = None
        # The call this runs for (engine/call_retries.py): one deadline over its operations,
        # within its own bound. A held settle keeps its own.
        call = None if held else current()
        waited_out = False
        try:
            while True:
                tries += 1
                try:
                    result = await op(tries == 1)
                except DriverUnavailableError as exc:
                    failure = exc
                    lost = is_connection_failure(exc)
                    limit_ms = deadline_ms if lost else min(deadline_ms, self.deadline_ms)
                    retried = is_retried(exc) if lost_too else is_rolled_back(exc)
                    if self._closed or limit_ms == 0 or not retried:
                        if held and retried and self._let_go:
                            mark_let_go(exc)  # said in the caller's one line
                        raise
                    now = clock.now_ms()
                    if tries == 1:
                        started = now
                        if call is not None and call.gave_up:
                            raise  # the call has waited the server out once already
                    left = started + limit_ms - now
                    if call is not None and tries > 1:
                        # The first retry goes at once whatever is left (a stale connection).
                        left = min(left, call.left_ms(self.deadline_ms, now - started))
                    if left <= 0:
                        waited_out = True
                        raise self._gave_up(exc, now - started, tries) from (exc.__cause__ or exc)
                    if held and lost:
                        if not holding:
                            holding = True
                            self.holding += 1
                            hold_started("postgres", what, limit_ms, exc)
                        self._held_failure = exc
                        self._held_tried_now()
                except BaseException as exc:
                    failure = exc  # what ended a hold, for its last line
                    raise
                else:
                    failure = None
                    now = clock.now_ms()
                    noted_answer(now - started if tries > 1 else 0, now - begun)
                    return result
                # The last try goes at the deadline itself.
                await self._pause(min(pause, left))
                pause = next_retry_pause_ms(pause)
        finally:
            if call is not None and tries > 1:
                call.ended(clock.now_ms() - started, waited_out)
            if holding:
                self.holding -= 1
                self._held_tried_now()
                if failure is None or not self._let_go:
                    hold_ended("postgres", what, clock.now_ms() - started, failure)

    def _gave_up(
        self, last: DriverUnavailableError, tried_ms: int, tries: int
    ) -> DriverUnavailableError:
        cause = last.__cause__ if last.__cause__ is not None else last
        detail = str(cause).strip() or type(cause).__name__
        if is_connection_failure(last):
            what = connection_lost(last)
        else:
            what = "the server rolled the transaction back each time, as it met others"
        state = getattr(cause, "sqlstate", None)
        kind = f"{type(cause).__name__}, SQLSTATE {state}" if state else type(cause).__name__
        error = DriverUnavailableError(
            "postgres",
            f"{what}: gave up after {tries} tries over {tried_ms / 1000:.1f} s "
            f"(last error {kind}: {detail})",
            last.fix,
        )
        error.details = {**(error.details or {}), "tried_ms": tried_ms, "tries": tries}
        return error

    async def _pause(self, ms: int) -> None:
        """Wait `ms` on the retry clock, or until `flush_held` asks the held settles to go. The
        sleep starts in this task, before it yields: a clock moved meanwhile cannot skip it."""
        if ms <= 0:
            await anyio.lowlevel.checkpoint()
            return
        with anyio.CancelScope() as scope:
            self._pausing.add(scope)
            try:
                await self.clock.sleep_ms(ms)
            finally:
                self._pausing.discard(scope)

    def _retry_now(self) -> None:
        for scope in self._pausing:
            scope.cancel()

    def _held_tried_now(self) -> None:
        self._held_tried.set()
        self._held_tried = asyncio.Event()

    async def flush_held(self) -> None:
        """Before a claim: settles held through an outage go first. Each is tried now; the
        claim waits until none is held, and fails as they do while the server stays away."""
        while self.holding and not self._closed:
            self._held_failure = None
            tried = self._held_tried
            self._retry_now()
            await tried.wait()
            failure = self._held_failure
            if failure is not None and self.holding:
                raise DriverUnavailableError(
                    "postgres",
                    f"{self.holding} settle(s) held through a lost connection could not be "
                    f"written yet, so nothing is claimed ({failure.cause})",
                    report_fix(self._url),
                ) from failure.__cause__

    def let_go(self) -> int:
        """The process is leaving: held settles and retries stop waiting and fail at their next
        try, as after `close()`, while the connections stay for what gets through at its first
        try (a worker's hand-back). Answers how many settles were held: each job's lease hands
        it on, and the caller says so in one line for them all."""
        held = self.holding
        self._let_go = True
        self.close()
        return held

    def close(self) -> None:
        """Retries stop waiting: each fails at its next try."""
        self._closed = True
        self._retry_now()
