"""How a running worker meets a database that stops answering: one warning when its calls start
to fail, a reminder every REMIND_MS while they do, and one line when one succeeds again; its
claims back off meanwhile, from the poll interval doubling to BACKOFF_MAX_MS. The outage is
timed from the first failure its calls saw (a call that retried before it failed says for how
long) to the first operation that got through: the driver says each (`noted_answer`), since a
loop may run next long after the database is back, and some (a lease heartbeat with nothing
held) succeed without asking it.

The loops beside the claims keep their own pace (a presence beat every 10 s, a lease heartbeat
every third of a lease, the scheduler, relay and pruner their own), which is slow enough, and a
heartbeat must not wait longer than its lease. Their failures come here through `failed`, which
the services' shared `attempt` (engine/services.py) calls: a scheduler, relay or pruner run on
its own, outside a worker, still logs each failure itself.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar

from engine.clock import Clock
from engine.errors import JobsError
from engine.iso_time import iso

logger = logging.getLogger("mcp_jobs.worker")

# The longest wait between two claims while they fail: the README's wait for a database that
# does not answer at start uses the same ceiling.
BACKOFF_MAX_MS = 30_000
REMIND_MS = 5 * 60_000


def backoff_ms(poll_ms: int, failures: int) -> int:
    """The wait before the next claim after `failures` in a row: the poll interval, doubling."""
    return min(BACKOFF_MAX_MS, poll_ms << min(failures - 1, 16))


async def back_off(
    clock: Clock, wait_for_work: Callable[[int], Awaitable[None]], poll_ms: int, failures: int
) -> None:
    """The wait after `failures` failed claims in a row. Past the poll interval a wake-up ends
    it (an enqueue here, a NOTIFY: `wait_for_work`, the driver's), and so does another call of
    the worker that succeeds again (its presence beat, every 10 s: `Outage.answered` pokes), as
    a stop does."""
    wait_ms = backoff_ms(poll_ms, failures)
    await clock.sleep_ms(poll_ms)
    if wait_ms > poll_ms:
        # A wait_for_work that returns early at once (a driver that cannot watch now) costs
        # one claim per poll interval, as before, never a spin.
        try:
            await wait_for_work(wait_ms - poll_ms)
        except JobsError:
            await clock.sleep_ms(wait_ms - poll_ms)


class Outage:
    """What worker `worker_id` knows of its database's absence. `on_answer` runs when a call
    that failed succeeds again (the worker ends its claim's wait there)."""

    def __init__(self, clock: Clock, worker_id: str, on_answer: Callable[[], None]) -> None:
        self.clock = clock
        self.worker_id = worker_id
        self._on_answer = on_answer
        # Each loop's failures in a row, by what it does ("claim", "worker presence beat").
        self._failing: dict[str, int] = {}
        self.since: int | None = None  # when the outage began; None while the database answers
        self._said_at = 0

    def failed(self, what: str, exc: JobsError) -> int:
        """Note that `what` failed with `exc`; answer how many times in a row it has."""
        failures = self._failing.get(what, 0) + 1
        self._failing[what] = failures
        now = self.clock.now_ms()
        if not exc.retryable:
            # Not the database away but a refusal that waiting may not mend: said every time.
            logger.warning("%s failed, retrying: %s", what, exc)
            return failures
        began = now - _tried_ms(exc)
        if self.since is None:
            self.since = began
            self._said_at = now
            logger.warning(
                "worker %s: %s failed: %s; its calls are tried again, claims backing off up to "
                "%d s, and a line says when the database answers again",
                self.worker_id,
                what,
                exc,
                BACKOFF_MAX_MS // 1000,
            )
        elif now - self._said_at >= REMIND_MS:
            self.since = min(self.since, began)
            self._said_at = now
            logger.warning(
                "worker %s: the database still does not answer, since %s (%d s): %s failed: %s",
                self.worker_id,
                iso(self.since),
                (now - self.since) // 1000,
                what,
                exc,
            )
        else:
            self.since = min(self.since, began)
            logger.debug("%s failed, retrying: %s", what, exc)
        return failures

    def answered(self, what: str) -> None:
        """`what` succeeded: its failures in a row end, and, if it had failed, the outage (a
        loop's success alone proves nothing: a lease heartbeat with nothing held asks nothing)."""
        if self._failing.pop(what, None) is not None:
            self._ended(0)

    def database_answered(self, retried_ms: int, took_ms: int) -> None:
        """An operation got through after retrying for `retried_ms`, `took_ms` in all: the first
        since calls failed ends the outage (not one sent before it began that never failed)."""
        since = self.since
        if since is not None and (retried_ms > 0 or self.clock.now_ms() - took_ms >= since):
            self._ended(retried_ms)

    def _ended(self, retried_ms: int) -> None:
        since, self.since = self.since, None
        if since is not None:
            now = self.clock.now_ms()
            logger.info(
                "worker %s: the database answers again after %.1f s",
                self.worker_id,
                (now - min(since, now - retried_ms)) / 1000,
            )
        self._on_answer()


def _tried_ms(exc: JobsError) -> int:
    """How long the failed call retried before it failed (a driver that says: `tried_ms`)."""
    tried = (exc.details or {}).get("tried_ms")
    return tried if isinstance(tried, int) and tried > 0 else 0


# The outage record of the worker whose run this task belongs to: its services are also run on
# their own, and their modules need not know of workers to report here.
RUNNING: ContextVar[Outage | None] = ContextVar("mcp_jobs_worker_outage", default=None)


def noted_failure(what: str, exc: JobsError) -> bool:
    """Hand `what`'s failure to the running worker's record; False outside a worker's run,
    where the caller logs it."""
    outage = RUNNING.get()
    if outage is None:
        return False
    outage.failed(what, exc)
    return True


def noted_success(what: str) -> None:
    outage = RUNNING.get()
    if outage is not None:
        outage.answered(what)


def noted_answer(retried_ms: int, took_ms: int) -> None:
    """A driver's operation got through, after retrying for `retried_ms` (0: at its first try),
    `took_ms` in all: within a worker's run, that ends its outage."""
    outage = RUNNING.get()
    if outage is not None and outage.since is not None:
        outage.database_answered(retried_ms, took_ms)
