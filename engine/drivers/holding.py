"""Holding a settle (ack, nack, step write) through a server that is away for a while, for the
drivers without a retrier of their own (Redis, NATS; PostgreSQL's is postgres/retry.py).

A body that finished is not run again because its settle met a restart or a dropped
connection: the settle is tried again, 50 ms doubling to 1 s, for up to `within_ms` of the
retry clock. Safe to repeat: every settle is fenced by the lease token and records it as the
settle's (`settled_by`), so a try after one whose reply was lost finds its own settle there and
succeeds without writing again. A hold logs one warning line when it starts and one line when
its settle is answered (or given up), never one a try: a settle of many jobs answers each job
(ack_many, save_steps_many), and that line says how many were written and how many refused, and
why (a lease that moved on, a job no longer stored).
A process on its way out (a worker stopped twice) lets go of a driver's holds (`Holds.let_go`):
each fails at its next try, with no line of its own (the caller says one for them all), and its
failure says so (`was_let_go`), so that the settle's caller does not say it again.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio

from engine.clock import Clock, next_retry_pause_ms
from engine.drivers.job_gone import JobGoneError
from engine.errors import JobsError, JobSlotLostError

logger = logging.getLogger(__name__)

T = TypeVar("T")

# The field of a failure's `details` that says a hold was let go, not given up.
LET_GO = "let_go"


class Holds:
    """The settles one driver holds: how many, and the pauses between their tries, so that all
    of them can be let go at once."""

    def __init__(self) -> None:
        self.held = 0
        self.gone = False  # set by let_go: no settle is held from then on
        self._pausing: set[anyio.CancelScope] = set()

    def let_go(self) -> int:
        """The process is leaving: held settles stop waiting and fail at their next try, and a
        settle that fails from now on is not held, while the connections stay for what gets
        through at its first try. Answers how many were held: each job's lease hands it on, and
        the caller says so in one line for them all."""
        self.gone = True
        for scope in self._pausing:
            scope.cancel()
        return self.held

    async def pause(self, clock: Clock, ms: int) -> None:
        """Wait `ms` on `clock`, or until `let_go`."""
        with anyio.CancelScope() as scope:
            self._pausing.add(scope)
            try:
                await clock.sleep_ms(ms)
            finally:
                self._pausing.discard(scope)


def mark_let_go(exc: JobsError) -> None:
    """Say on `exc` that it ended a settle let go (`Holds.let_go`, PostgreSQL's `let_go`)."""
    exc.details = {**(exc.details or {}), LET_GO: True}


def was_let_go(exc: JobsError) -> bool:
    """Whether `exc` ended a settle its driver let go: its caller's one line said so."""
    return bool((exc.details or {}).get(LET_GO))


def settle_of(kind: str, job_ids: Sequence[str]) -> str:
    """What a held settle is, for its log lines: "ack of job 01a2…", "ack of 3 jobs (…)"."""
    return f"{kind} of {jobs_named(job_ids)}"


def jobs_named(job_ids: Sequence[str]) -> str:
    """Jobs as a log line names them: "job 01a2…", "3 jobs (01a2…, …)" (five ids at most)."""
    if len(job_ids) == 1:
        return f"job {job_ids[0]}"
    more = ", …" if len(job_ids) > 5 else ""
    return f"{len(job_ids)} jobs ({', '.join(job_ids[:5])}{more})"


def hold_started(driver: str, what: str, within_ms: int, exc: JobsError) -> None:
    logger.warning(
        "%s: the %s is held, tried again for up to %d s until it is written: %s",
        driver,
        what,
        within_ms // 1000,
        exc,
    )


def hold_ended(
    driver: str, what: str, held_ms: int, exc: BaseException | None = None, answer: object = None
) -> None:
    """The hold's last line: `exc` when it was given up or refused whole, else by `answer`
    (a list of per-job outcomes, each None or its refusal, for a settle of many jobs)."""
    held = f"{driver}: the {what} held {held_ms / 1000:.1f} s"
    if exc is not None:
        logger.warning("%s is not written: %s", held, exc)
        return
    outcomes = answer if isinstance(answer, list) else []
    refused = Counter(_refused_as(r) for r in outcomes if isinstance(r, JobsError))
    if not refused:
        logger.info("%s is written", held)
        return
    written = sum(1 for r in outcomes if r is None)
    why = ", ".join(f"{reason}: {n}" for reason, n in sorted(refused.items()))
    logger.warning(
        "%s is answered: written %d, refused %d (%s)", held, written, refused.total(), why
    )


def _refused_as(exc: JobsError) -> str:
    if isinstance(exc, JobGoneError):
        return "job gone"
    if isinstance(exc, JobSlotLostError):
        return "lease lost"
    return exc.code


async def hold(
    settle: Callable[[], Awaitable[T]],
    *,
    within_ms: int,
    clock: Clock,
    stopped: Callable[[], bool],
    passes: Callable[[JobsError], bool],
    driver: str,
    what: str,
    holds: Holds | None = None,
) -> T:
    """Run `settle` (the `what` of `driver`, for the log); while it fails with an error that
    `passes` (an outage, not a refusal), run it again until `within_ms` of `clock` have gone by
    or `stopped()`, or `holds` (the driver's) are let go. The first pause is not skipped: the
    client has just retried at once itself."""
    holds = Holds() if holds is None else holds
    started = clock.now_ms()
    pause = next_retry_pause_ms(0)
    held = False
    try:
        while True:
            try:
                result = await settle()
            except JobsError as exc:
                left = started + within_ms - clock.now_ms()
                if holds.gone and passes(exc):
                    mark_let_go(exc)
                    raise
                if stopped() or not passes(exc) or left <= 0:
                    if held:
                        hold_ended(driver, what, clock.now_ms() - started, exc)
                    raise
                if not held:
                    held = True
                    holds.held += 1
                    hold_started(driver, what, within_ms, exc)
                await holds.pause(clock, min(pause, left))
                pause = next_retry_pause_ms(pause)
            else:
                if held:
                    hold_ended(driver, what, clock.now_ms() - started, answer=result)
                return result
    finally:
        if held:
            holds.held -= 1
