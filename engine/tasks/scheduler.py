"""The scheduler: turns each declared task's due cron occurrences into jobs, once each.

Every worker runs one, and the workers of a deployment need not declare the same tasks (other
`--app` modules, two versions during a rolling deploy): each task is fired by whichever process
declaring it holds that task's lease. Three things make an occurrence fire once:
- a lease per task (`lead("task:<name>")`): one scheduler at a time does a task's work, and
  another declaring it takes over when that lease expires;
- a claim: the task's last fired occurrence is moved from the value this scheduler read to the
  occurrence by compare-and-set, in the same step as its jobs are enqueued (`task_fire`), so a
  scheduler that read stale state (its lease ran out while the app's `enqueue` ran) loses the
  claim and enqueues nothing, and one that dies meanwhile loses no occurrence: PostgreSQL,
  SQLite and memory commit both in one transaction and Redis runs both in one script; NATS
  records the claimed occurrences with the claim, and whichever scheduler next leads the task
  enqueues them again if their jobs may not all be in (`task_unfinished`);
- the idempotency key `task:<name>:<occurrence_ms>` on every job it enqueues: an occurrence
  enqueued again is deduped while its job is live.

Catch-up after downtime follows the task's policy: `skip` fires only the latest missed
occurrence, `all` fires every missed one oldest first, never more than `max_catch_up` per round
(either is logged once, with what it skipped or has to catch up). A task seen for the first
time fires nothing from before this scheduler started. One whose state reads as none though it
fired before (the store was reset, as a Redis restarted without persistence is, or another
program removed or overwrote it) fires on from the occurrence this scheduler knows it last
fired, else from now: which occurrences fired before then is not known, so none is counted as
skipped nor fired again (the reset took their dedupe keys too). A last fired
occurrence more than CLOCK_STEP_MS ahead of the clock means the clock was stepped back: the
task fires on from now (logged once) rather than stay silent until that instant.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine import bounds
from engine.client import Enqueue
from engine.drivers.base import LEADER_LEASES, SCHEDULER, lead_each, require
from engine.errors import JobsError
from engine.ids import worker_id
from engine.run_job import storable_payload
from engine.services import ServiceLoop, attempt
from engine.tasks.declare import TASK_ACTOR, CatchUp, TaskDefinition, TaskRegistry, tasks_of
from engine.tasks.errors import TaskEnqueueFailedError, TaskEntryInvalidError
from engine.tasks.failures import next_failure
from engine.tasks.notices import OUTAGE_COUNT_BOUND, TaskNotices, occurrences
from engine.tasks.occurrences import HORIZON_MS
from engine.tracing import current_traceparent
from schemas.jobs import EnqueueRequest, EnqueueResult
from schemas.scheduler import TaskState

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


class Scheduler(ServiceLoop):
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
        # Task → the instant it fires on from while its state reads as none (`_from_none`).
        self._none_from: dict[str, int] = {}
        # Task → the instant up to which this scheduler knows what fired, from the state it
        # last read as a value or wrote by a claim: where the task fires on from if it is lost.
        self._known: dict[str, int] = {}
        # Task → (first, last) round this scheduler saw another holder lead it since it last
        # read the task's state: an occurrence due then was the peer's to fire.
        self._peer_led: dict[str, tuple[int, int]] = {}
        # Task → (the last fired occurrence read ahead of the clock, the instant it fires on from).
        self._stepped: dict[str, tuple[int, int]] = {}
        # Task → (the instant its occurrences were fired up to, its next occurrence after that),
        # for a task this scheduler has led without a break since it last read its state: nothing
        # is due before then, so a round reads nothing for it.
        self._quiet: dict[str, tuple[int, int]] = {}
        self._last_at: int | None = None
        self.notices = TaskNotices(lambda: jobs.fix_context)
        super().__init__()

    # --- one round ------------------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        return bool(self.led)

    async def round(self) -> SchedulerRound:
        """Take or renew each task's lease; fire the due occurrences of the tasks it holds."""
        now = self.clock.now_ms()
        self.led = await self._lead({d.name for d in self.tasks}, self.lease_ms)
        return await self._fire(now, self.led)

    async def fire_due(self, now: int | None = None) -> SchedulerRound:
        """Fire what is due WITHOUT taking the leases — `round()` is the guarded entry point.
        Safe against a racing peer: each occurrence is claimed before it is enqueued."""
        at = self.clock.now_ms() if now is None else now
        return await self._fire(at, {definition.name for definition in self.tasks})

    async def _fire(self, at: int, led: set[str]) -> SchedulerRound:
        report = SchedulerRound(at=at, leader=bool(led))
        self._forget_quiet(at, led)
        for definition in self.tasks:
            name = definition.name
            if name not in led or (name in self._quiet and at < self._quiet[name][1]):
                continue
            try:
                await self._fire_task(definition, at, report)
            except JobsError as exc:
                # This task waits for the next round; the other tasks still fire.
                self._quiet.pop(name, None)
                report.failed[name] = exc
                self.notices.failed(name, exc)
                await self._store_failure(name, exc, at)
        return report

    def _forget_quiet(self, at: int, led: set[str]) -> None:
        """Drop what a task's last read said once its lease was out of hand (a peer may have
        fired it, or left occurrences unfinished) or the clock was stepped back; note that a
        peer leads it."""
        if self._last_at is not None and at < self._last_at:
            self._quiet.clear()
        self._last_at = at
        for definition in self.tasks:
            task = definition.name
            if task not in led:
                self._quiet.pop(task, None)
                self._none_from.pop(task, None)
                self._peer_led[task] = (self._peer_led.get(task, (at, at))[0], at)

    def _mark_quiet(self, definition: TaskDefinition, fired_after: int) -> None:
        upcoming = definition.schedule.next(fired_after, 1)
        self._quiet[definition.name] = (fired_after, upcoming[0] if upcoming else HORIZON_MS)

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

    @staticmethod
    def due(definition: TaskDefinition, after: int, now: int) -> list[int]:
        """The occurrences of `definition` after `after` this round should fire, oldest first,
        plus one more when the backlog exceeds `max_catch_up` (the caller trims it)."""
        schedule = definition.schedule
        if definition.catch_up == "skip":
            latest = schedule.latest(after, now)
            return [] if latest is None else [latest]
        return schedule.between(after, now, definition.max_catch_up + 1)

    def _fires_after(self, definition: TaskDefinition, state: TaskState | None, now: int) -> int:
        """The instant after which the task's occurrences are due: its last fired one, unless the
        clock was stepped back behind it (then from when that was first seen, logged once with
        what that costs: the occurrences up to the last fired one fire a second time)."""
        task = definition.name
        last_fired_ms = state.last_fired_at if state is not None else None
        if last_fired_ms is None:
            return self._from_none(definition, now, stored=state is not None)
        self._none_from.pop(task, None)
        self._peer_led.pop(task, None)
        if not stepped_back(last_fired_ms, now):
            return last_fired_ms
        seen = self._stepped.get(task)
        if seen is None or seen[0] != last_fired_ms:
            seen = (last_fired_ms, now)
            self._stepped[task] = seen
            again = definition.schedule.between(now, last_fired_ms, OUTAGE_COUNT_BOUND + 1)
            logger.warning(
                "task %s last fired the occurrence at %d ms, %d s ahead of this clock (%d ms): "
                "the clock was stepped back, so the task fires on from now, and the %s up to "
                "that one, which fired before, fire again as they come due (a job of theirs "
                "still live is deduped; one that finished runs again)",
                task,
                last_fired_ms,
                (last_fired_ms - now) // 1000,
                now,
                occurrences(len(again), OUTAGE_COUNT_BOUND),
            )
        return seen[1]

    def _from_none(self, definition: TaskDefinition, now: int, *, stored: bool) -> int:
        """Where a task with no last fired occurrence fires on from: this scheduler's start for
        one seen for the first time. One whose state was lost (this scheduler read or claimed a
        value, or a peer led it while an occurrence came due, and only a failure or nothing is
        stored now) fires on from what this scheduler knows fired, unless an occurrence came due
        since while a peer led it: then from now, as what fired before is not known here. What
        is not known is neither counted as skipped nor fired again."""
        task = definition.name
        start = self._none_from.get(task)
        if start is not None:
            return start
        known = self._known.get(task)
        peer = self._peer_led.pop(task, None)
        # The peer fired what came due while it led (or missed it): the lost state no longer says.
        by_peer = peer is not None and bool(
            definition.schedule.between(peer[0] if known is None else known, peer[1], 1)
        )
        if known is not None and not by_peer and not stepped_back(known, now):
            start = known
            self.notices.state_lost(definition, start, now, known=True)
        elif known is not None or (by_peer and not stored):
            # An occurrence due this very instant has not fired: the state read none.
            start = now - 1
            self.notices.state_lost(definition, now, now, known=False)
        else:
            start = self.baseline_ms
        self._none_from[task] = start
        return start

    async def _fire_task(
        self, definition: TaskDefinition, now: int, report: SchedulerRound
    ) -> None:
        name = definition.name
        state = await self.driver.task_state(name)
        await self._finish(definition, report)
        last = state.last_fired_at if state is not None else None
        after = self._fires_after(definition, state, now)
        if last is not None:
            self._known[name] = after
        due = self.due(definition, after, now)
        if definition.catch_up == "all":
            self.notices.catching_up(definition, after, now, due)
        if len(due) > definition.max_catch_up:
            report.backlog.append(definition.name)
            due = due[: definition.max_catch_up]
        if not due:
            self._mark_quiet(definition, after)
            return
        batches, failure = await self._batches(definition, due, definition.catch_up)
        if batches:
            occurrences = [occurrence for occurrence, _ in batches]
            requests = [r for _, batch in batches for r in batch]
            try:
                # Claimed from the state read above: a peer that fired meanwhile wins, and then
                # this scheduler enqueues nothing (its read, and its entries, are stale).
                results = await self.driver.task_fire(name, last, occurrences, requests)
            except JobsError as exc:
                self.notices.unfired(name, occurrences[0], exc)
                raise
            if results is None:
                logger.debug("task %s: a peer fired its occurrences first", name)
                return
            # Its state is this claim now, whatever it read as before.
            self._mark_quiet(definition, occurrences[-1])
            self._none_from.pop(name, None)
            self._known[name] = occurrences[-1]
            self._stepped.pop(name, None)
            if definition.catch_up == "skip":
                self.notices.skipped(definition, after, occurrences[-1])
            _report(report, name, batches, results)
            self.notices.fired(name)
        if failure is not None:
            occurrence, error = failure
            self.notices.unfired(name, occurrence, error)
            raise error

    async def _finish(self, definition: TaskDefinition, report: SchedulerRound) -> None:
        """Enqueue the jobs of occurrences a firing claimed whose jobs may not all be in (a
        driver without transactions, whose scheduler died or whose enqueue failed after the
        claim): built again from the task's `enqueue`, deduped by their keys where they are."""
        name = definition.name
        unfinished = await self.driver.task_unfinished(name)
        if not unfinished:
            return
        # Claimed already, so owed whatever the policy: tried again until their jobs are in.
        batches, failure = await self._batches(definition, unfinished, "all")
        if batches:
            requests = [r for _, batch in batches for r in batch]
            results = await self.driver.enqueue(requests) if requests else []
            await self.driver.task_finished(name, [occurrence for occurrence, _ in batches])
            _report(report, name, batches, results)
        if failure is not None:
            raise failure[1]

    async def _batches(
        self, definition: TaskDefinition, due: Sequence[int], catch_up: CatchUp
    ) -> tuple[list[tuple[int, list[EnqueueRequest]]], tuple[int, JobsError] | None]:
        """The jobs of each of `due` in order, up to the first whose `enqueue` fails (with that
        occurrence and its error, which says what `catch_up` makes of it: what came before it
        fires, in order)."""
        batches: list[tuple[int, list[EnqueueRequest]]] = []
        for occurrence in due:
            try:
                entries = await definition.entries(occurrence)
                batches.append((occurrence, self._requests(definition, occurrence, entries)))
            except JobsError as exc:
                return batches, (occurrence, exc)
            except Exception as exc:
                # Its traceback is logged with the failure, when it starts or changes.
                failure = TaskEnqueueFailedError(
                    definition.name,
                    occurrence,
                    exc,
                    definition.declared_by,
                    catch_up,
                )
                failure.__cause__ = exc
                return batches, (occurrence, failure)
        return batches, None

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

    async def _turn(self) -> None:
        """A round, then sleep until the next occurrence or lease renewal."""
        started = self.clock.now_ms()
        report = await attempt("scheduler round", logger, self.round)
        wake_at = started + self.renew_ms if report is None else self._wake_at(report)
        # An absolute deadline: time that passed during the round is not slept again.
        await self._sleep(wake_at - self.clock.now_ms())

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

    async def _release(self) -> None:
        """Hand the leases back on the way out (renewed for 0 ms) so a peer fires those tasks
        at once instead of after the leases run out."""
        led, self.led = self.led, set()
        if not led:
            return
        try:
            await self._lead(led, 0)
        except JobsError as exc:
            logger.warning(
                "%d tasks' leases not released (a peer takes over on expiry): %s", len(led), exc
            )

    async def _lead(self, tasks: set[str], lease_ms: int) -> set[str]:
        """Take or renew the lease of each of `tasks` (0 ms hands them back); the tasks held."""
        by_lease = {lease_name(task): task for task in tasks}
        held = await lead_each(self.leases, sorted(by_lease), self.holder, lease_ms)
        return {by_lease[name] for name in held}


def _report(
    report: SchedulerRound,
    task: str,
    batches: list[tuple[int, list[EnqueueRequest]]],
    results: list[EnqueueResult],
) -> None:
    offset = 0
    for occurrence, batch in batches:
        report.fired.append(
            FiredOccurrence(task, occurrence, results[offset : offset + len(batch)])
        )
        offset += len(batch)


def _item(definition: TaskDefinition, occurrence: int, entry: object) -> Enqueue:
    if isinstance(entry, Enqueue):
        # A task's jobs always dedupe: a duplicate means a peer already fired this occurrence.
        return entry._replace(on_conflict="dedupe")
    if isinstance(entry, tuple | list) and len(entry) in (2, 3):
        parts: Sequence[Any] = entry
        tenant = parts[2] if len(parts) == 3 else None
        return Enqueue(job=parts[0], input=parts[1], tenant_id=tenant)
    raise TaskEntryInvalidError(definition.name, occurrence, entry)
