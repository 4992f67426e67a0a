"""Claimed jobs a worker will not run, handed back ready without an attempt spent and said: one
over a cap (shed, rule 7), those it claimed ahead that waited too long for a slot or never
started before a stop, and whatever a worker whose run was cancelled still holds. A job
cancelled or taken meanwhile is no longer the worker's to return: nothing is said of it."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import anyio

from engine.clock import Clock
from engine.drivers.base import Driver
from engine.errors import JobsError, JobSlotLostError
from engine.observe import CapKind, WorkerEventKind
from engine.run_job import RunHandle
from engine.worker_events import WorkerEvents
from engine.worker_presence import Presence, not_left
from engine.worker_services import WorkerServices
from schemas.jobs import ClaimedJob, NackOptions

logger = logging.getLogger("mcp_jobs.worker")

# How long a worker whose run was cancelled (or that crashed) spends handing its jobs back
# before it goes: a cancelled caller waits that long at most. What is left then (a write that
# does not commit, a body shielded for longer) goes back when its lease runs out.
HAND_BACK_MS = 5_000
# How long a job claimed ahead may wait for a slot. Longer, the pace its claim was sized by was
# wrong (a body running far longer than the recent ones): it goes back for a worker with a slot
# free. Kept, it waited as long as that body ran, and a kill -9 meanwhile spent an attempt of a
# job whose body never began (one allowed: dead, JOB_SLOT_LOST).
WAIT_AHEAD_MS = 1_000


def cap_kind(key: str) -> CapKind:
    """The kind of a cap from its key (engine.limits names caps `kind:name`, or `global`)."""
    kind = key.partition(":")[0]
    return kind if kind in ("queue", "tenant", "job") else "global"  # type: ignore[return-value]


async def give_back(
    driver: Driver,
    events: WorkerEvents,
    claimed: ClaimedJob,
    options: NackOptions,
    kind: WorkerEventKind,
    reason: str,
    cap_kind: CapKind | None = None,
) -> None:
    """Return a claimed job the worker will not run, and say so (`kind`, for `reason`)."""
    try:
        await driver.nack(claimed.record.id, claimed.token, options)
    except JobSlotLostError:
        return
    events.about(kind, claimed.record, reason, cap_kind)


async def hand_back_unstarted(
    driver: Driver, events: WorkerEvents, claimed: ClaimedJob, reason: str
) -> None:
    """Back ready, no attempt spent: a job whose body never began (`reason` says why)."""
    options = NackOptions(counts_as_attempt=False)
    await give_back(driver, events, claimed, options, "handed_back", reason)


def say_unsettled(claimed: ClaimedJob, exc: Exception, started: bool) -> None:
    """A job's run that ended in a failure of its own (a settle that did not get through, a
    defect): its traceback; or, the database away before its body began (a cap's slots, a rate
    take, a hand-back), one line, since nothing is to settle and its lease returns it."""
    record = claimed.record
    if started or not (isinstance(exc, JobsError) and exc.retryable):
        logger.error("job %s (%s) could not be settled", record.id, record.name, exc_info=exc)
        return
    logger.warning(
        "job %s (%s) not started: %s: %s; it runs again once its lease runs out",
        record.id,
        record.name,
        exc.code,
        exc.cause,
    )


async def hand_back_waiting(
    driver: Driver,
    events: WorkerEvents,
    waiting: Sequence[RunHandle],
    held: dict[str, RunHandle],
    reason: str = "worker stopping before it started",
) -> list[RunHandle]:
    """Jobs claimed ahead (`waiting`), each back ready at once; answers those the database
    did not take back (away), which stay in `held` (the worker's jobs by id) for the caller to
    keep or drop. The rest leave `held`."""
    unreturned: list[RunHandle] = []

    async def hand_back(handle: RunHandle) -> None:
        record = handle.claimed.record
        try:
            await give_back(
                driver,
                events,
                handle.claimed,
                NackOptions(counts_as_attempt=False),
                "handed_back",
                reason,
            )
        except JobsError as exc:
            logger.warning("job %s not handed back, its lease will: %s", record.id, exc)
            unreturned.append(handle)
            return
        held.pop(record.id, None)

    if waiting:
        async with anyio.create_task_group() as tg:
            for handle in waiting:
                tg.start_soon(hand_back, handle)
    return unreturned


def let_go_of_held(driver: Driver) -> int:
    """Let go of the settles `driver` holds through an outage (its `let_go_of_held`: PostgreSQL,
    Redis, NATS): how many."""
    let_go = getattr(driver, "let_go_of_held", None)
    return int(let_go()) if let_go is not None else 0


def say_handing_back(worker_id: str, jobs: int, abandoned: int, lease_ms: int) -> None:
    """The second stop's one line: the jobs handed back now, and the settles held through an
    outage that were `abandoned` (their jobs come back as their leases run out)."""
    held = ""
    if abandoned:
        held = (
            f"; {abandoned} settle(s) held while the database is away are abandoned: their "
            f"jobs run again once their leases run out (within {lease_ms // 1000} s)"
        )
    logger.warning(
        "worker %s stopped again: handing back %d job(s) in flight now, within %d s%s",
        worker_id,
        jobs,
        HAND_BACK_MS // 1000,
        held,
    )


def say_left(worker_id: str, left: int) -> None:
    """One line for the jobs a going worker could not hand back within HAND_BACK_MS (the
    database away): its teardown leaves them to their leases."""
    if left:
        logger.warning(
            "worker %s: %d job(s) not handed back within %d s: each runs again once its lease "
            "runs out",
            worker_id,
            left,
            HAND_BACK_MS // 1000,
        )


def say_gone_after_second_stop(
    worker_id: str, left: int, lease_ms: int, presence: str | None, cut: Sequence[str]
) -> None:
    """The second stop's last line, once its teardown is over: what it left to run out (the
    jobs not handed back, the presence not taken out, the leases of the services cut short);
    none when it left nothing."""
    parts = list(cut)
    if presence is not None:
        parts.insert(0, presence)
    if left:
        parts.insert(
            0,
            f"{left} job(s) not handed back within {HAND_BACK_MS // 1000} s run again once their "
            f"leases run out (within {lease_ms // 1000} s)",
        )
    if parts:
        logger.warning("worker %s gone after its second stop: %s", worker_id, "; ".join(parts))


def hand_back_ms(clock: Clock, deadline_ms: int | None) -> int:
    """How long a teardown may still wait for the database: HAND_BACK_MS, or after a second stop
    what is left of its deadline (`deadline_ms`, epoch ms)."""
    return HAND_BACK_MS if deadline_ms is None else max(0, deadline_ms - clock.now_ms())


async def leave(
    presence: Presence,
    services: WorkerServices,
    deadline_ms: int | None,
    left: int,
    lease_ms: int,
) -> None:
    """A teardown's end: the presence taken out, and what was left to run out said (`left` jobs
    not handed back); after a second stop (`deadline_ms`) within its deadline, and in one line
    with what the `services` it cut short left."""
    worker_id = presence.worker_id
    if deadline_ms is None:
        say_left(worker_id, left)
        await presence.leave()
        return
    gone: list[JobsError | None] = []

    async def take_out() -> None:
        gone.append(await presence.leave(said=False))

    await within(presence.jobs.clock, hand_back_ms(presence.jobs.clock, deadline_ms), take_out)
    said = None if gone == [None] else not_left(gone[0] if gone else None)
    say_gone_after_second_stop(worker_id, left, lease_ms, said, services.cut_said())


def stale(waiting: Sequence[RunHandle], now_ms: int) -> list[RunHandle]:
    """The jobs of `waiting` that have waited WAIT_AHEAD_MS or more for a slot."""
    return [h for h in waiting if now_ms - h.held_ms >= WAIT_AHEAD_MS]


async def within(clock: Clock, ms: int, work: Callable[[], Awaitable[None]]) -> None:
    """`work`, given up (cancelled) once `ms` have passed on `clock`."""
    async with anyio.create_task_group() as tg:

        async def deadline() -> None:
            await clock.sleep_ms(ms)
            tg.cancel_scope.cancel()

        async def done() -> None:
            await work()
            tg.cancel_scope.cancel()

        tg.start_soon(deadline)
        tg.start_soon(done)


async def hand_back_cancelled(
    driver: Driver, events: WorkerEvents, clock: Clock, claimed: ClaimedJob
) -> None:
    """A job whose task was cancelled from outside the worker (asyncio.run ending with the
    worker started cancels every task at once): back ready at once, within HAND_BACK_MS, and
    shielded, since the cancellation that got here would stop the write too."""

    async def hand_back() -> None:
        try:
            await hand_back_unstarted(driver, events, claimed, "worker cancelled")
        except JobsError as exc:
            logger.warning("job %s not handed back, its lease will: %s", claimed.record.id, exc)

    with anyio.CancelScope(shield=True):
        await within(clock, HAND_BACK_MS, hand_back)
