"""The scheduler: turns each declared task's due cron occurrences into jobs, once each.

Every worker runs one, and the workers of a deployment need not declare the same tasks (other
`--app` modules, two versions during a rolling deploy): each task is fired by whichever process
declaring it holds that task's lease. Three things make an occurrence fire once:
- a lease per task (`lead("task:<name>")`): one scheduler at a time does a task's work, and
  another declaring it takes over when that lease expires;
- a claim (`task_claim`): the task's last fired occurrence is moved from the value this
  scheduler read to the occurrence by compare-and-set BEFORE its jobs are enqueued, so a
  scheduler that read stale state (its lease ran out while the app's `enqueue` ran) loses the
  claim and enqueues nothing; a new holder resumes where the old one stopped;
- the idempotency key `task:<name>:<occurrence_ms>` on every job it enqueues: a claimed batch
  whose enqueue failed is enqueued again next round, and deduped if part of it landed.

Catch-up after downtime follows the task's policy: `skip` fires only the latest missed
occurrence, `all` fires every missed one oldest first, never more than `max_catch_up` per round.
A task seen for the first time fires nothing from before this scheduler started. A last fired
occurrence more than CLOCK_STEP_MS ahead of the clock means the clock was stepped back: the
task fires on from now (logged once) rather than stay silent until that instant.
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
from engine.drivers.base import LEADER_LEASES, SCHEDULER, require
from engine.errors import JobsError
from engine.ids import worker_id
from engine.run_job import storable_payload
from engine.services import attempt
from engine.tasks.declare import TASK_ACTOR, TaskDefinition, TaskRegistry, tasks_of
from engine.tasks.errors import TaskEnqueueFailedError, TaskEntryInvalidError
from engine.tasks.failures import next_failure
from engine.tracing import current_traceparent
from schemas.jobs import EnqueueRequest, EnqueueResult

if TYPE_CHECKING:
    from engine.client import Jobs

logger = logging.getLogger("mcp_jobs.scheduler")

DEFAULT_LEASE_MS = 30_000
# Between rounds while some task still has missed occurrences beyond its `max_catch_up`.
DEFAULT_BACKLOG_MS = 1_000
# A last fired occurrence further ahead of the clock than this was fired by a clock since
# stepped back (NTP, a VM restore); within it, it is the skew between processes' clocks, and
# the task waits for it rather than fire that occurrence again.
CLOCK_STEP_MS = 60_000


def lease_name(task: str) -> str:
    """The lease whose holder fires `task` (task names hold no ':', so no other lease's)."""
    return f"{TASK_ACTOR}{task}"


def stepped_back(last_fired_ms: int | None, now_ms: int) -> bool:
    """Whether a task's last fired occurrence lies so far ahead of `now_ms` that the clock was
    stepped back since: the scheduler fires it on from now (describe_tasks agrees)."""
    return last_fired_ms is not None and last_fired_ms > now_ms + CLOCK_STEP_MS


@dataclass(frozen=True)
class FiredOccurrence:
    """One occurrence this round turned into jobs (a deduped result means another scheduler
    enqueued it first)."""

    task: str
    occurrence_ms: int
    results: list[EnqueueResult]


@dataclass(frozen=True)
class SchedulerRound:
    """What one round did: whether this scheduler led (held some task's lease), what fired,
    what failed."""

    at: int
    leader: bool
    fired: list[FiredOccurrence] = field(default_factory=list[FiredOccurrence])
    # Task name → the error that stopped it this round; it is retried next round.
    failed: dict[str, JobsError] = field(default_factory=dict[str, JobsError])
    # Tasks (catch_up='all') with more missed occurrences than one round may fire.
    backlog: list[str] = field(default_factory=list[str])


class Scheduler:
    """Fires the cron tasks of `jobs.registry` (or `tasks`). `Worker` runs one in-process by
    default."""

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
        self.leases = require(jobs.driver, LEADER_LEASES)
        self.clock = jobs.clock
        self.tasks = tasks if tasks is not None else tasks_of(jobs.registry)
        self.holder = holder or f"scheduler:{worker_id()}"
        self.lease_ms = lease_ms
        self.backlog_ms = backlog_ms
        # Occurrences at or before this are never fired for a task with no durable state yet:
        # a task seen for the first time starts from now, not from the epoch.
        self.baseline_ms = self.clock.now_ms()
        # The tasks whose lease this scheduler held at its last round.
        self.led: set[str] = set()
        # Claimed occurrences whose jobs are not enqueued yet (the enqueue failed): the claim
        # is this scheduler's, so it enqueues them at its next round, lease or not.
        self._pending: dict[str, list[tuple[int, list[EnqueueRequest]]]] = {}
        # Task → the code it last failed with, so a task failing every round logs it once.
        self._failing: dict[str, str] = {}
        # Task → (the last fired occurrence read ahead of the clock, the instant it fires on from).
        self._stepped: dict[str, tuple[int, int]] = {}
        self._stopping = False
        self._wake = anyio.Event()
        self._done = anyio.Event()

    # --- one round ------------------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        return bool(self.led)

    async def round(self) -> SchedulerRound:
        """Take or renew each task's lease; fire the due occurrences of the tasks it holds."""
        now = self.clock.now_ms()
        led: set[str] = set()
        for definition in self.tasks:
            if await self.leases.lead(lease_name(definition.name), self.holder, self.lease_ms):
                led.add(definition.name)
        self.led = led
        return await self._fire(now, led)

    async def fire_due(self, now: int | None = None) -> SchedulerRound:
        """Fire what is due WITHOUT taking the leases — `round()` is the guarded entry point.
        Safe against a racing peer: each occurrence is claimed before it is enqueued."""
        at = self.clock.now_ms() if now is None else now
        return await self._fire(at, {definition.name for definition in self.tasks})

    async def _fire(self, at: int, led: set[str]) -> SchedulerRound:
        report = SchedulerRound(at=at, leader=bool(led))
        for definition in self.tasks:
            name = definition.name
            try:
                if name in self._pending:
                    await self._enqueue_claimed(name, report)
                if name in led:
                    await self._fire_task(definition, at, report)
            except JobsError as exc:
                # This task waits for the next round; the other tasks still fire.
                report.failed[name] = exc
                self._note_failure(name, exc)
                await self._store_failure(name, exc, at)
        return report

    async def _store_failure(self, task: str, error: JobsError, at: int) -> None:
        """Store the failure for describe and diagnose, which run in other processes: one write
        per failed round, so its count and time say it is still failing (the task's claim,
        when it fires again, clears it)."""
        try:
            state = await self.driver.task_state(task)
            previous = state.failure if state is not None else None
            failure = next_failure(previous, storable_payload(error.to_payload()), at)
            await self.driver.task_failure(task, failure)
        except JobsError as exc:
            logger.warning("task %s's failure not stored (retried next round): %s", task, exc)

    def _note_failure(self, task: str, error: JobsError) -> None:
        """Log a task's failure when it starts or its code changes, not every round."""
        if self._failing.get(task) == error.code:
            logger.debug("task %s still does not fire: %s", task, error)
            return
        self._failing[task] = error.code
        logger.error(
            "task %s did not fire: %s (fix: %s); tried again every round, logged again when "
            "the error changes",
            task,
            error,
            error.fix,
        )

    def _note_fired(self, task: str) -> None:
        if self._failing.pop(task, None) is not None:
            logger.warning("task %s fires again", task)

    def due(self, definition: TaskDefinition, last_fired_ms: int | None, now: int) -> list[int]:
        """The occurrences of `definition` this round should fire, oldest first, plus one more
        when the backlog exceeds `max_catch_up` (the caller trims it)."""
        after = self.baseline_ms if last_fired_ms is None else last_fired_ms
        schedule = definition.schedule
        if definition.catch_up == "skip":
            latest = schedule.latest(after, now)
            return [] if latest is None else [latest]
        return schedule.between(after, now, definition.max_catch_up + 1)

    def _fires_after(self, task: str, last_fired_ms: int | None, now: int) -> int | None:
        """The instant after which `task`'s occurrences are due: its last fired one, unless the
        clock was stepped back behind it (then from when that was first seen, logged once)."""
        if last_fired_ms is None or not stepped_back(last_fired_ms, now):
            return last_fired_ms
        seen = self._stepped.get(task)
        if seen is None or seen[0] != last_fired_ms:
            seen = (last_fired_ms, now)
            self._stepped[task] = seen
            logger.warning(
                "task %s last fired the occurrence at %d ms, %d s ahead of this clock (%d ms): "
                "the clock was stepped back, so the task fires on from now",
                task,
                last_fired_ms,
                (last_fired_ms - now) // 1000,
                now,
            )
        return seen[1]

    async def _fire_task(
        self, definition: TaskDefinition, now: int, report: SchedulerRound
    ) -> None:
        name = definition.name
        state = await self.driver.task_state(name)
        last = state.last_fired_at if state is not None else None
        due = self.due(definition, self._fires_after(name, last, now), now)
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
        if batches:
            # Claimed from the state read above: a peer that fired meanwhile wins, and then
            # this scheduler enqueues nothing (its read, and its entries, are stale).
            if not await self.driver.task_claim(name, last, batches[-1][0]):
                logger.debug("task %s: a peer fired its occurrences first", name)
                return
            self._stepped.pop(name, None)
            self._pending[name] = batches
            await self._enqueue_claimed(name, report)
        if failure is not None:
            raise failure

    async def _enqueue_claimed(self, task: str, report: SchedulerRound) -> None:
        batches = self._pending[task]
        requests = [r for _, batch in batches for r in batch]
        results = await self.driver.enqueue(requests) if requests else []
        del self._pending[task]
        offset = 0
        for occurrence, batch in batches:
            report.fired.append(
                FiredOccurrence(task, occurrence, results[offset : offset + len(batch)])
            )
            offset += len(batch)
        self._note_fired(task)

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
            if definition.name not in self.led:
                continue
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
        """Hand the leases back on the way out (renewed for 0 ms) so a peer fires those tasks
        at once instead of after the leases run out."""
        led, self.led = self.led, set()
        for task in sorted(led):
            try:
                await self.leases.lead(lease_name(task), self.holder, 0)
            except JobsError as exc:
                logger.warning(
                    "task %s's lease not released (a peer takes over on expiry): %s", task, exc
                )


def _item(definition: TaskDefinition, occurrence: int, entry: object) -> Enqueue:
    if isinstance(entry, Enqueue):
        # A task's jobs always dedupe: a duplicate means a peer already fired this occurrence.
        return entry._replace(on_conflict="dedupe")
    if isinstance(entry, tuple | list) and len(entry) in (2, 3):
        parts: Sequence[Any] = entry
        tenant = parts[2] if len(parts) == 3 else None
        return Enqueue(job=parts[0], input=parts[1], tenant_id=tenant)
    raise TaskEntryInvalidError(definition.name, occurrence, entry)
