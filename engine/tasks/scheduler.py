"""The scheduler: one leader at a time turns due cron occurrences into jobs, exactly once each.

Three things make an occurrence fire once even with many workers each running a scheduler:
- a leadership lease in the database (`scheduler_lead`): only the holder fires, and a new leader
  takes over when the old one's lease expires;
- durable state (`task_fired`): the latest fired occurrence per task, so a new leader resumes
  where the old one stopped and never fires an occurrence twice;
- the idempotency key `task:<name>:<occurrence_ms>` on every job it enqueues, so two schedulers
  that both believe they lead (a lease expiring mid-round) dedupe into one live job.

Catch-up after downtime follows the task's policy: `skip` fires only the latest missed
occurrence, `all` fires every missed one oldest first, never more than `max_catch_up` per round.
A task seen for the first time fires nothing from before this scheduler started.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from engine import bounds
from engine.client import Enqueue
from engine.clock import sleep_unless_woken
from engine.drivers.base import SCHEDULER, require
from engine.errors import JobsError
from engine.ids import worker_id
from engine.services import attempt
from engine.tasks.declare import TASK_ACTOR, TaskDefinition, TaskRegistry, tasks_of
from engine.tasks.errors import TaskEnqueueFailedError, TaskEntryInvalidError
from engine.tracing import current_traceparent
from schemas.jobs import EnqueueRequest, EnqueueResult

if TYPE_CHECKING:
    from engine.client import Jobs

logger = logging.getLogger("mcp_jobs.scheduler")

DEFAULT_LEASE_MS = 30_000
# Between rounds while some task still has missed occurrences beyond its `max_catch_up`.
DEFAULT_BACKLOG_MS = 1_000


@dataclass(frozen=True)
class FiredOccurrence:
    """One occurrence this round turned into jobs (a deduped result means another scheduler
    enqueued it first)."""

    task: str
    occurrence_ms: int
    results: list[EnqueueResult]


@dataclass(frozen=True)
class SchedulerRound:
    """What one round did: whether this scheduler led, what fired, what failed."""

    at: int
    leader: bool
    fired: list[FiredOccurrence] = field(default_factory=list[FiredOccurrence])
    # Task name → the error that stopped it this round; it is retried next round.
    failed: dict[str, JobsError] = field(default_factory=dict[str, JobsError])
    # Tasks (catch_up='all') with more missed occurrences than one round may fire.
    backlog: list[str] = field(default_factory=list[str])


class Scheduler:
    """Fires the cron tasks of `jobs.registry`. `Worker` runs one in-process by default."""

    def __init__(
        self,
        jobs: Jobs,
        *,
        tasks: TaskRegistry | None = None,
        holder: str | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        backlog_ms: int = DEFAULT_BACKLOG_MS,
    ) -> None:
        for name, value in (("lease_ms", lease_ms), ("backlog_ms", backlog_ms)):
            bounds.whole(name, value, 1, bounds.MAX_DELAY_MS, unit="ms")
        self.jobs = jobs
        require(jobs.driver, SCHEDULER)
        self.driver = jobs.driver
        self.clock = jobs.clock
        self.tasks = tasks if tasks is not None else tasks_of(jobs.registry)
        self.holder = holder or f"scheduler:{worker_id()}"
        self.lease_ms = lease_ms
        self.backlog_ms = backlog_ms
        # Occurrences at or before this are never fired for a task with no durable state yet:
        # a task seen for the first time starts from now, not from the epoch.
        self.baseline_ms = self.clock.now_ms()
        self.leading = False
        self._stopping = False
        self._wake = anyio.Event()
        self._done = anyio.Event()

    # --- one round ------------------------------------------------------------------------------

    async def round(self) -> SchedulerRound:
        """Take or renew the lease; while leading, fire every task's due occurrences."""
        now = self.clock.now_ms()
        if len(self.tasks) == 0:
            return SchedulerRound(at=now, leader=False)
        self.leading = await self.driver.scheduler_lead(self.holder, self.lease_ms)
        if not self.leading:
            return SchedulerRound(at=now, leader=False)
        return await self.fire_due(now)

    async def fire_due(self, now: int | None = None) -> SchedulerRound:
        """Fire what is due WITHOUT checking leadership — `round()` is the guarded entry point.
        Safe against a racing peer: the occurrence keys dedupe."""
        at = self.clock.now_ms() if now is None else now
        report = SchedulerRound(at=at, leader=True)
        for definition in self.tasks:
            try:
                await self._fire_task(definition, at, report)
            except JobsError as exc:
                # This task waits for the next round; the other tasks still fire.
                report.failed[definition.name] = exc
                logger.error("task %s did not fire: %s", definition.name, exc)
        return report

    def due(self, definition: TaskDefinition, last_fired_ms: int | None, now: int) -> list[int]:
        """The occurrences of `definition` this round should fire, oldest first, plus one more
        when the backlog exceeds `max_catch_up` (the caller trims it)."""
        after = self.baseline_ms if last_fired_ms is None else last_fired_ms
        schedule = definition.schedule
        if definition.catch_up == "skip":
            latest = schedule.latest(after, now)
            return [] if latest is None else [latest]
        return schedule.between(after, now, definition.max_catch_up + 1)

    async def _fire_task(
        self, definition: TaskDefinition, now: int, report: SchedulerRound
    ) -> None:
        state = await self.driver.task_state(definition.name)
        due = self.due(definition, state.last_fired_at if state else None, now)
        if len(due) > definition.max_catch_up:
            report.backlog.append(definition.name)
            due = due[: definition.max_catch_up]
        if not due:
            return
        batches: list[tuple[int, list[EnqueueRequest]]] = []
        failure: JobsError | None = None
        for occurrence in due:
            try:
                entries = await definition.entries(occurrence)
                batches.append((occurrence, self._requests(definition, occurrence, entries)))
            except JobsError as exc:
                failure = exc  # fire what came before it, in order; this one retries next round
                break
            except Exception as exc:
                logger.exception("task %s: enqueue(%d) raised", definition.name, occurrence)
                failure = TaskEnqueueFailedError(
                    definition.name, occurrence, exc, definition.declared_by
                )
                failure.__cause__ = exc
                break
        requests = [r for _, batch in batches for r in batch]
        results = await self.driver.enqueue(requests) if requests else []
        if batches:
            await self.driver.task_fired(definition.name, batches[-1][0])
        offset = 0
        for occurrence, batch in batches:
            report.fired.append(
                FiredOccurrence(definition.name, occurrence, results[offset : offset + len(batch)])
            )
            offset += len(batch)
        if failure is not None:
            raise failure

    def _requests(
        self, definition: TaskDefinition, occurrence: int, entries: object
    ) -> list[EnqueueRequest]:
        """Requests built exactly as `enqueue` builds them, keyed by the occurrence instead of
        the job's own key function: the job's dedupe rule stays `(name, tenant, key)`."""
        if isinstance(entries, Enqueue) or not isinstance(entries, list | tuple):
            raise TaskEntryInvalidError(definition.name, occurrence, entries)
        base = f"{TASK_ACTOR}{definition.name}:{occurrence}"
        seen: dict[tuple[str, str], int] = {}
        items = [_item(definition, occurrence, entry) for entry in entries]
        requests: list[EnqueueRequest] = []
        actor = f"{TASK_ACTOR}{definition.name}"
        now = self.jobs.clock.now_ms()
        for request in self.jobs.items.build(items, actor, now, current_traceparent()):
            # One occurrence may enqueue the same job more than once (one per region, say);
            # the repeat count keeps those apart deterministically, so peers agree on the keys.
            slot = (request.name, request.tenant_id or "")
            repeat = seen.get(slot, 0)
            seen[slot] = repeat + 1
            key = base if repeat == 0 else f"{base}#{repeat}"
            requests.append(request._replace(idempotency_key=key))
        return requests

    # --- the loop -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run rounds until `stop()`; sleeps until the next occurrence or lease renewal."""
        try:
            while not self._stopping:
                started = self.clock.now_ms()
                report = await attempt("scheduler round", logger, self.round)
                wake_at = started + self.renew_ms if report is None else self._wake_at(report)
                # An absolute deadline: time that passed during the round is not slept again.
                await self._sleep(wake_at - self.clock.now_ms())
        finally:
            with anyio.CancelScope(shield=True):
                await self._release()
            self._done.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    def rearm(self) -> None:
        """Make a stopped scheduler runnable again, for its worker's next run (between runs)."""
        self._stopping = False
        self._wake = anyio.Event()
        self._done = anyio.Event()

    async def wait_stopped(self) -> None:
        await self._done.wait()

    @property
    def renew_ms(self) -> int:
        return max(1, self.lease_ms // 3)

    def _wake_at(self, report: SchedulerRound) -> int:
        """When the next round is due: the next occurrence, or the lease renewal if sooner."""
        if not report.leader:
            return report.at + self.renew_ms
        if report.backlog:
            return report.at + self.backlog_ms
        wake_at = report.at + self.renew_ms
        for definition in self.tasks:
            upcoming = definition.schedule.next(report.at, 1)
            if upcoming:
                wake_at = min(wake_at, upcoming[0])
        return wake_at

    async def _sleep(self, ms: int) -> None:
        if self._stopping or ms <= 0:
            await anyio.lowlevel.checkpoint()
            return
        await sleep_unless_woken(self.clock, ms, self._wake)

    async def _release(self) -> None:
        """Hand the lease back on the way out (renewed for 0 ms) so a peer leads at once
        instead of after the lease runs out."""
        if not self.leading:
            return
        self.leading = False
        try:
            await self.driver.scheduler_lead(self.holder, 0)
        except JobsError as exc:
            logger.warning("scheduler lease not released (a peer takes over on expiry): %s", exc)


def _item(definition: TaskDefinition, occurrence: int, entry: object) -> Enqueue:
    if isinstance(entry, Enqueue):
        # A task's jobs always dedupe: a duplicate means a peer already fired this occurrence.
        return entry._replace(on_conflict="dedupe")
    if isinstance(entry, tuple | list) and len(entry) in (2, 3):
        parts: Sequence[Any] = entry
        tenant = parts[2] if len(parts) == 3 else None
        return Enqueue(job=parts[0], input=parts[1], tenant_id=tenant)
    raise TaskEntryInvalidError(definition.name, occurrence, entry)
