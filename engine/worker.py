"""The worker: claims up to its free slots, runs each job through `execute`, and drains cleanly.

`await Worker(jobs).run()` runs until stopped; `async with Worker(jobs) as worker:` (or `await
worker.start()` ... `await worker.stop()`) runs it in the background of a plain program. A worker
claims from the queues of the jobs registered with it (`queues=` names others, `queues="*"` all);
a job of a name it does not run (another app on the same queue) goes back for a live worker that
runs it, or is parked when none does (worker_unknown_names).

With a backlog it claims ahead (`prefetch` jobs wait for a slot, two claims on their way at
once); waiting jobs are the worker's (leases kept, a cancel heard) until a stop hands them back.

Caps and rate limits are held in the database, so they hold across machines: claims walk past
the jobs of a cap found full, and a job still claimed over one is shed in its place (stays
ready, no attempt, no error). A drain stops claiming, lets in-flight jobs finish until its
deadline, then hands the rest back unharmed; a second stop (`hand_back_now()`, the CLI's second
Ctrl-C) and a run cancelled (or crashed) hand back at once what it holds, and closing the client
first stops the runs on it. One run at a time: a second `run()`/`start()` while it runs is
refused (WorkerAlreadyRunningError).

This module holds the loop and the worker's slots (what it holds, runs, waits for, claims).
Beside it, each in `worker_<part>`: arguments, services, leases, events, gate (what turns a
claimed job away: caps, rates, unknown_names), hand_back, presence, outage, runs (a client's
close), wake (how the loop waits); and claim_plan, the claim sizes.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING

import anyio

from engine import worker_arguments, worker_runs
from engine.claim_plan import ClaimPlanner
from engine.driver_errors import DriverClosedError
from engine.errors import JobsError, WorkerAlreadyRunningError
from engine.fix_lines import CommandContext, fixes_written
from engine.ids import worker_id as new_worker_id
from engine.limits import Limits, queue_limits_claimed
from engine.observe import WorkerEventKind, WorkerEventListener
from engine.outbox import OutboxRelay
from engine.pruner import Pruner
from engine.retention import Retention
from engine.run_job import RunHandle, Runtime, execute
from engine.tasks.scheduler import Scheduler
from engine.worker_arguments import ALL_QUEUES as ALL_QUEUES
from engine.worker_arguments import MIN_LEASE_MS as MIN_LEASE_MS
from engine.worker_arguments import QueueChoice, client_checked, counts_checked, kinds_checked
from engine.worker_caps import CapRoom
from engine.worker_events import WorkerEvents
from engine.worker_gate import StartGate
from engine.worker_hand_back import (
    HAND_BACK_MS,
    WAIT_AHEAD_MS,
    hand_back_cancelled,
    hand_back_ms,
    hand_back_unstarted,
    hand_back_waiting,
    leave,
    let_go_of_held,
    say_handing_back,
    say_unsettled,
    stale,
    within,
)
from engine.worker_leases import LeaseKeeper
from engine.worker_outage import RUNNING, Outage, back_off
from engine.worker_presence import Presence, published_policy
from engine.worker_rates import RateGate
from engine.worker_services import WorkerServices
from engine.worker_stopping import Stopping as Stopping
from engine.worker_unknown_names import UnknownNames
from engine.worker_wake import LoopWake, drained
from schemas.jobs import ClaimedJob

if TYPE_CHECKING:
    from engine.client import Jobs

logger = logging.getLogger("mcp_jobs.worker")

DEFAULT_LEASE_MS = 30_000
WORKER_POLL_MS = 500
# With a backlog, this many claims may be on their way at once. One claim at a time leaves the
# slots idle for its round trip after every wave of short jobs; a second one in flight lets
# the database work on the next wave while this process runs the last.
CLAIMS_IN_FLIGHT = 2


class Worker:
    """Runs the jobs registered with `jobs`. `await Worker(jobs).run()`, or in the background:
    `async with Worker(jobs) as worker: ...`.

    `queues`: None claims from the queues of the registered jobs, a list from those queues,
    `"*"` from every queue. `scheduler` / `outbox_relay`: None runs the cron scheduler only when
    tasks are registered, and the outbox relay only when the outbox is in use (this process
    staged a job, or rows were waiting when the worker started); True or False decides.
    `prune`: None prunes settled history (one worker at a time) unless MCP_JOBS_PRUNE=off;
    `retention` is the policy it prunes by (engine.retention; per job: `@job(retention=...)`).
    `apps`: the app modules this worker imported (`--app`), published with its jobs'
    descriptors (engine.descriptors); None names the modules that declare them."""

    def __init__(
        self,
        jobs: Jobs,
        *,
        concurrency: int = 16,
        queues: QueueChoice = None,
        limits: Limits | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        poll_ms: int = WORKER_POLL_MS,
        drain_ms: int = 30_000,
        prefetch: int | None = None,
        listeners: Iterable[WorkerEventListener] = (),
        worker_id: str | None = None,
        scheduler: bool | None = None,
        outbox_relay: bool | None = None,
        prune: bool | None = None,
        retention: Retention | None = None,
        apps: Iterable[str] | None = None,
    ) -> None:
        client_checked(jobs)
        prefetch, choice = counts_checked(
            concurrency, queues, lease_ms, poll_ms, drain_ms, prefetch, worker_id
        )
        listed, apps = kinds_checked(
            listeners, limits, retention, apps, scheduler, outbox_relay, prune
        )
        self.jobs = jobs
        self.driver = jobs.driver
        self.clock = jobs.clock
        self.concurrency = concurrency
        self._queue_choice: QueueChoice = choice
        self.limits = limits or Limits()
        queue_limits_claimed(self.limits, self.queues)
        self.lease_ms = lease_ms
        self.poll_ms = poll_ms
        self.drain_ms = drain_ms
        # How many claimed jobs may wait here for a slot (0: claim only for free slots).
        self.prefetch = prefetch
        self.plan = ClaimPlanner(concurrency, prefetch)
        # What the claims of the current run ask for, resolved when it starts.
        self._claim_queues = self.queues
        self.id = worker_id or new_worker_id()
        self.events = WorkerEvents(self.clock, self.id, listed)
        self.wake = LoopWake()
        # A call that fails again after the database went away ends the claims' backoff.
        self.outage = Outage(self.clock, self.id, self.wake.poke)
        self._inflight: dict[str, RunHandle] = {}
        self._scope_type: type[anyio.CancelScope] | None = None
        # Job tasks are plain asyncio tasks, each under a cancel scope of its own (see _start).
        self._tasks: set[asyncio.Task[None]] = set()
        self._crash: BaseException | None = None
        # Job bodies running now. A job whose body is over but whose settle write (ack/nack)
        # has not committed yet stays in `_inflight` (heartbeats, drain) but no longer holds a
        # slot: the next job starts while the commit is on its way, as many as `concurrency`
        # such writes at once.
        self._bodies = 0
        # Claimed ahead, waiting for a slot: in `_inflight` already, so their leases are kept
        # and an operator's cancel reaches them before they start.
        self._waiting: deque[RunHandle] = deque()
        # Claims on their way with a backlog, and how many jobs they asked for together.
        self._claims: set[asyncio.Task[list[ClaimedJob]]] = set()
        self._claiming = 0
        self._backlog = False
        self._stopping = False
        self._drain_deadline = 0
        # The run's scope, which `hand_back_now()` cancels, and its teardown's deadline (epoch ms).
        self._run_scope: anyio.CancelScope | None = None
        self._hand_back_by: int | None = None
        # Set when a claim ahead lands jobs to wait for a slot (`_return_stale_waiting`).
        self._ahead_landed = asyncio.Event()
        # Rate limits: the take before a start, and the wake-ups at starts it reserved.
        self._rate_gate = RateGate(
            self.driver, self.clock, self.limits, self.wake.poke, lambda: self.wake.waiting_for_work
        )
        # A run is going (run() or start() began it, until its teardown ends): one at a time.
        self._running = False
        # run_until_idle() is going: no run begins beside it, nor it beside one.
        self._until_idle = False
        # Under run_until_idle(): bodies started, and whether its last batch started none.
        self._idle_started = 0
        self._idle_stalled = False
        self._done = asyncio.Event()
        # Set once the loop has made its first claim: what `start()` waits for.
        self._claiming_now = asyncio.Event()
        # `run()` in the background, when started with `start()`.
        self._runner: asyncio.Task[None] | None = None
        self.runtime = Runtime(
            driver=self.driver,
            settler=jobs.settler,
            clock=self.clock,
            worker_id=self.id,
            lease_ms=lease_ms,
            emit=self.events.emit,
            wants=self.events.wants,
            known_names=lambda: [d.name for d in jobs.registry],
            max_output_bytes=jobs.max_payload_bytes,
        )
        self.leases = LeaseKeeper(self.runtime, self._inflight, concurrency)
        self.caps = CapRoom(self.clock, poll_ms)
        unknown_names = UnknownNames(jobs.descriptors, self.clock, self.id, poll_ms)
        self.gate = StartGate(
            self.driver, self.events, self.limits, self.caps, self._rate_gate, unknown_names
        )
        self._asked = 0  # how many jobs the last claim asked for (CapRoom.claim_limit)
        # The keeper's record of the bodies that ended last, which `_body_done` appends to.
        self._ended = self.leases.ended
        self.services = WorkerServices(jobs, scheduler, outbox_relay, prune, retention)
        policy = published_policy(self.services.pruner, retention)
        self.presence = Presence(
            jobs,
            self.id,
            lambda: self.queues,
            concurrency,
            policy,
            apps,
            scheduling=lambda: self.services.scheduler is not None,
            caps=self.limits.published(),
        )

    @property
    def fix_context(self) -> CommandContext | None:
        """Written into the fix of an error leaving this worker: its client's (engine/client.py)."""
        return self.jobs.fix_context

    # --- what it claims and what runs beside it ----------------------------------------------

    @property
    def queues(self) -> list[str] | None:
        """The queues this worker claims from now (None: every queue)."""
        return worker_arguments.claimed_queues(self._queue_choice, self.jobs.registry)

    @property
    def scheduler(self) -> Scheduler | None:
        return self.services.scheduler

    @property
    def outbox_relay(self) -> OutboxRelay | None:
        return self.services.outbox_relay

    @property
    def pruner(self) -> Pruner | None:
        return self.services.pruner

    def add_listener(self, listener: WorkerEventListener) -> None:
        self.events.add(listener)

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    # --- running in the background ------------------------------------------------------------

    @fixes_written
    async def start(self) -> None:
        """Run the worker in a background task; return once it listens for new work and has made
        its first claim. `await stop()` ends it. While it runs, a second start (or run) is
        refused: WorkerAlreadyRunningError."""
        await self._start_as("start()")

    async def _start_as(self, call: str) -> None:
        if self._stopping and self._running:
            # A stop still draining: wait for it (raising what crashed that run), then start
            # afresh, rather than return with a worker about to end.
            await self._stopped()
        elif self._stopping:
            self._ready_again()  # a stop that found nothing running: this start overrides it
        self._begin_run(call)
        self._claiming_now = asyncio.Event()
        loop = asyncio.get_running_loop()
        runner = self._runner = loop.create_task(self._run(listen=True))
        claiming = loop.create_task(self._claiming_now.wait())
        try:
            await asyncio.wait({runner, claiming}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            runner.cancel()
            raise
        finally:
            claiming.cancel()
        if runner.done():
            if self._runner is runner:
                self._runner = None
            runner.result()  # what ended it before it claimed: raised here

    def stop(self) -> Stopping:
        """Stop claiming; in-flight jobs finish, or are handed back at the drain deadline.
        `await worker.stop()` returns once that is done (`run()` returns then too). Once it is
        done the worker may be started again. A stop while nothing runs is kept for a `run()`
        about to begin, which then returns at once (a signal that came first still stops the
        worker); `start()` forgets it: a worker stopped, then started, runs."""
        if not self._stopping:
            self._stopping = True
            self._drain_deadline = self.clock.now_ms() + self.drain_ms
        self.services.stop()
        self.wake.poke()
        return Stopping(self._stopped)

    def hand_back_now(self) -> int:
        """The second stop (the CLI's second Ctrl-C): end the run now, its bodies cancelled at
        once, its teardown handing the jobs in flight back within HAND_BACK_MS: one deadline,
        which cuts short a service's release, a hand-back or the presence's removal waiting for
        a database away. Settles held through an outage are let go (their leases return the
        jobs), said in one line; answers how many. Close the client next: its driver retries
        nothing after it."""
        held = let_go_of_held(self.driver)
        say_handing_back(self.id, len(self._inflight), held, self.lease_ms)
        self.stop()
        if self._run_scope is not None:
            if self._hand_back_by is None:
                self._hand_back_by = self.clock.now_ms() + HAND_BACK_MS
                self.services.cut_at(self.clock, self._hand_back_by)
            for handle in list(self._inflight.values()):
                handle.stop("drain")
            self._run_scope.cancel()
        return held

    def _ready_again(self) -> None:
        """Forget a stop that is done (or found nothing running), and make the services it
        stopped runnable again: the next run starts afresh."""
        self._stopping = False
        self._hand_back_by = None
        self.services.rearm()

    async def drain(self) -> None:
        """`await stop()`."""
        await self.stop()

    @fixes_written
    async def _stopped(self) -> None:
        runner = self._runner
        if runner is not None:
            await asyncio.wait({runner})
            if self._runner is runner:  # not a run begun since, by a start() that waited too
                self._runner = None
            if not runner.cancelled():
                runner.result()
        elif self._running:
            await self._done.wait()

    @fixes_written
    async def __aenter__(self) -> Worker:
        await self._start_as("async with worker")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.stop()
        except Exception:
            if exc is None:
                raise
            # The block's own exception is the one to raise; the worker's crash is logged.
            logger.exception("worker %s crashed", self.id)

    # --- the loop -----------------------------------------------------------------------------

    @fixes_written
    async def run(self) -> None:
        """Claim and run jobs until `stop()`/`drain()`, then finish or hand back in-flight work.
        Called again once that is done, it runs again; called while it runs, it is refused
        (WorkerAlreadyRunningError) and the run going on is left as it was."""
        if self._running and self._stopping:
            await self._done.wait()  # the last run's drain ends first
        elif self._stopping:
            logger.info("worker %s was stopped before it ran: run() returns at once", self.id)
        self._begin_run("run()")
        await self._run()

    def _refuse_if_running(self, call: str) -> None:
        """One run at a time: a second loop would claim into this worker's slots and state."""
        if self._running or self._until_idle:
            raise WorkerAlreadyRunningError(self.id, self.queues, call)

    def _begin_run(self, call: str) -> None:
        # Nothing awaits between the check and the mark, so two calls at once cannot both pass.
        self._refuse_if_running(call)
        self._running = True
        self._done = asyncio.Event()

    async def _run(self, listen: bool = False) -> None:
        """The run `_begin_run` made this worker's one; `listen`: first listen for other
        processes' enqueues (start(): PostgreSQL's LISTEN), so its first wait hears them."""
        self._crash = None
        self._closed_under: DriverClosedError | None = None
        self._claim_queues = self.queues
        # This run's tasks (its services too, made below) report failures to its outage record.
        running = RUNNING.set(self.outage)
        worker_runs.began(self.driver, self._stop_for_close)
        try:
            with anyio.CancelScope() as self._run_scope:
                await self._claim_and_drain(listen)
        finally:
            self._run_scope = None
            # anyio's shield, not asyncio's: a caller's anyio cancel scope re-delivers its
            # cancellation at every await, and the teardown below must still finish.
            with anyio.CancelScope(shield=True):
                await self._let_go()
                left = len(self._inflight)
                await self._cancel_claims()
                await self._cancel_tasks()
                await leave(self.presence, self.services, self._hand_back_by, left, self.lease_ms)
            worker_runs.ended(self.driver, self._stop_for_close)
            self._ready_again()
            self._running = False
            self._done.set()
            RUNNING.reset(running)
        if self._closed_under is not None:
            raise self._closed_under

    async def _claim_and_drain(self, listen: bool) -> None:
        """The run until its drain is done: claims while it is not stopping, then the drain."""
        start_listening = getattr(self.driver, "start_listening", None)
        if listen and start_listening is not None:
            await start_listening()
        await self.services.choose(self.id, claims_nothing=self._claim_queues == [])
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.presence.run)
            tg.start_soon(self.leases.keep)
            tg.start_soon(self.leases.watch, tg)
            tg.start_soon(self._rate_gate.run)
            tg.start_soon(self._return_stale_waiting)
            self.services.start(tg)
            self._backlog = False
            while not self._stopping:
                if self._crash is not None:
                    raise self._crash
                self._start_waiting()
                if self._backlog:
                    # Claim for the slots about to free (and the jobs that may wait for
                    # them) without waiting for the claim: its jobs join `_waiting`.
                    ask = self._claim_room()
                    if ask >= self.plan.claim_batch and len(self._claims) < CLAIMS_IN_FLIGHT:
                        self._claim_ahead(ask)
                        continue
                    await self._race()
                    continue
                if self._claims or self._waiting:
                    await self._race()  # the backlog ran out: let the last claims land
                    continue
                free = self._free_slots()
                if free < 1:
                    await self._race()
                    continue
                batch = await self._claim(free)
                self._claiming_now.set()
                if batch is None:
                    continue  # it failed and waited: claim again, no poll on top
                for claimed in batch:
                    self._start(self._hold(claimed))
                self._backlog = bool(batch) and len(batch) == self._asked
                if self._backlog:
                    continue  # the queue may hold more: claim again before waiting
                if batch:
                    # A quiet queue: let the new jobs begin before this loop sets up its
                    # wait, since a job's latency is measured to its start.
                    await asyncio.sleep(0)
                if self.caps.wake_due():
                    continue  # a full cap freed a slot while the claim was on its way
                await self._race(self._wait_for_work)
            await self._hand_back_waiting()
            await drained(self.clock, self._drain_deadline, self._inflight, self.wake)
            if self._crash is not None:
                raise self._crash
            await self.services.wait_stopped()
            tg.cancel_scope.cancel()

    @fixes_written
    async def run_until_idle(self) -> int:
        """Run every job that is due now, then return how many were claimed. For scripts and
        tests; `run()` is the long-lived loop. Not beside a run of this worker (nor another
        run_until_idle()): WorkerAlreadyRunningError."""
        self._refuse_if_running("run_until_idle()")
        self._until_idle = True
        try:
            return await self._run_until_idle()
        finally:
            self._until_idle = False
            self._idle_stalled = False

    async def _run_until_idle(self) -> int:
        total = 0
        self._claim_queues = self.queues
        while True:
            await self.services.publish_staged()
            batch = await self._claim_capped(self.concurrency)
            if not batch:
                return total
            total += len(batch)
            began = self._idle_started
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.leases.keep)
                tg.start_soon(self.leases.watch, tg)
                try:
                    for claimed in batch:
                        self._start(self._hold(claimed))
                    if self._tasks:
                        await asyncio.wait(set(self._tasks))
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._let_go()
                        await self._cancel_tasks()
                tg.cancel_scope.cancel()
            self._idle_stalled = self._idle_started == began
            if self._crash is not None:
                crash, self._crash = self._crash, None
                raise crash

    async def _claim_capped(self, free: int, *, loop: bool = False) -> list[ClaimedJob]:
        """Claim for `free` slots, past the jobs whose cap this worker found full. `loop`: the
        loop's own claim, whose size it compares with the answer (`_asked`)."""
        limit = self.caps.claim_limit(free)
        if loop:
            self._asked = limit
        if limit < 1:
            return []
        excluding = self.caps.exclusion()
        if excluding is None:
            return await self.driver.claim(self.id, limit, self.lease_ms, self._claim_queues)
        return await self.driver.claim(
            self.id, limit, self.lease_ms, self._claim_queues, excluding=excluding
        )

    async def _claim(self, free: int) -> list[ClaimedJob] | None:
        """The jobs claimed; None when the claim failed and its backoff was waited out."""
        try:
            batch = await self._claim_capped(free, loop=True)
        except DriverClosedError as closed:
            self._closed(closed)
            return []
        except JobsError as exc:
            failures = self.outage.failed("claim", exc)
            wait = self.driver.wait_for_work
            await self._race(partial(back_off, self.clock, wait, self.poll_ms, failures))
            return None
        self.outage.answered("claim")
        return batch

    async def _race(self, wait: Callable[[], Awaitable[None]] | None = None) -> None:
        """Wait for `wait` (work, when given) to return, or without one for a freed slot; `stop()`
        or a crashed job ends either (a poke). Nothing awaits between the `_stopping` check and
        the wait starting, so a poke cannot fall in between unseen."""
        if self._stopping:
            return
        if wait is None:
            await self.wake.slot()
        else:
            await self.wake.work(wait)

    def _free_slots(self) -> int:
        return self.plan.free_slots(self._bodies, len(self._inflight), len(self._waiting))

    def _claim_room(self) -> int:
        return self.plan.claim_room(
            self._bodies, len(self._inflight), len(self._waiting), self._claiming
        )

    def _claim_ahead(self, ask: int) -> None:
        self._claiming += ask
        task = asyncio.get_running_loop().create_task(self._claim_quietly(ask))
        self._claims.add(task)
        task.add_done_callback(partial(self._claim_landed, ask))

    async def _claim_quietly(self, ask: int) -> list[ClaimedJob]:
        """A claim ahead: a failure ends the backlog and the loop's own claim, which waits before
        it retries, takes over."""
        try:
            return await self._claim_capped(ask)
        except JobsError as exc:
            self.outage.failed("claim", exc)
            return []

    def _claim_landed(self, ask: int, task: asyncio.Task[list[ClaimedJob]]) -> None:
        self._claims.discard(task)
        self._claiming -= ask
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            if self._crash is None:
                self._crash = exc
            self.wake.poke()
            return
        batch = task.result()
        now = self.clock.now_ms() if batch else 0
        for claimed in batch:
            handle = self._hold(claimed)
            handle.held_ms = now
            self._waiting.append(handle)
        if batch:
            self._ahead_landed.set()
        if len(batch) < ask:
            self._backlog = False  # the queue ran dry: back to waiting for work
        self.wake.slot_freed()

    def _start_waiting(self) -> None:
        while self._waiting and self._free_slots() > 0:
            handle = self._waiting.popleft()
            if (why := self.leases.unstartable(handle)) is None:
                self._start(handle)
                continue
            # Cancelled, or its lease lost or run out, while it waited: never started nor settled.
            record = handle.claimed.record
            self._inflight.pop(record.id, None)
            kind: WorkerEventKind = "cancelled" if handle.reason == "cancelled" else "lease_lost"
            self.events.about(kind, record, why)

    async def _cancel_claims(self) -> None:
        """Claims still on their way when the worker goes: their jobs' leases hand them on."""
        for task in self._claims:
            task.cancel()
        if self._claims:
            await asyncio.wait(set(self._claims))

    async def _return_stale_waiting(self) -> None:
        """Jobs claimed ahead wait for a slot at most WAIT_AHEAD_MS (worker_hand_back); one the
        database does not take back waits on under its lease, tried again as long after. No
        claim goes ahead again until a body ends: the pace it was sized by misled. Asleep while
        nothing waits: an idle worker or one through an outage is not woken for it."""
        clock = self.clock
        while True:
            if not self._waiting:
                self._ahead_landed.clear()
                await self._ahead_landed.wait()
                continue
            now = clock.now_ms()
            oldest = min(handle.held_ms for handle in self._waiting)
            if now - oldest < WAIT_AHEAD_MS:
                await clock.sleep_ms(oldest + WAIT_AHEAD_MS - now)
                continue
            late = stale(self._waiting, now)
            self.plan.paced = False
            for handle in late:
                self._waiting.remove(handle)
            reason = f"waited {WAIT_AHEAD_MS} ms or more for a slot; back for a worker with one"
            kept = await hand_back_waiting(self.driver, self.events, late, self._inflight, reason)
            for handle in kept:
                handle.held_ms = clock.now_ms()
            self._waiting.extendleft(reversed(kept))
            self.wake.slot_freed()

    async def _hand_back_waiting(self) -> None:
        """A stopping worker returns the jobs it claimed ahead and never started: the claims on
        their way land first, then each goes back ready, without an attempt spent."""
        while self._claims:
            await asyncio.wait(set(self._claims))
        waiting, self._waiting = list(self._waiting), deque()
        for handle in await hand_back_waiting(self.driver, self.events, waiting, self._inflight):
            self._inflight.pop(handle.claimed.record.id, None)  # its lease hands it on

    def _body_done(self, handle: RunHandle) -> None:
        self._bodies -= 1
        now = self.clock.now_ms()
        self.plan.body_finished(now - handle.started_ms)
        self._ended.append((now, handle))
        self.wake.slot_freed()

    def _hold(self, claimed: ClaimedJob) -> RunHandle:
        """Take a claimed job into the worker's care (heartbeats, drain) before it starts."""
        scope_type = self._scope_type
        if scope_type is None:
            # The running loop's own scope class: made directly, a scope skips anyio's lookup
            # of the async library at every job.
            scope_type = self._scope_type = type(anyio.CancelScope())
        handle = RunHandle(claimed, scope_type)
        self._inflight[claimed.record.id] = handle
        return handle

    def _start(self, handle: RunHandle) -> None:
        """Run one claimed job in a task of its own.

        A plain asyncio task rather than an anyio task group child: anyio spends a cancel
        scope, an event and a wrapper coroutine on each child, a sizeable share of a no-op
        job's cost. The structure a task group gives is kept by hand: the worker tears down and
        awaits every job task before `run()` returns (`RunHandle.tear_down`: shields in a body
        still hold), and a BaseException escaping a job ends the worker as it would have
        through the group."""
        self._bodies += 1
        handle.started_ms = self.clock.now_ms()
        handle.on_body_done = partial(self._body_done, handle)
        task = asyncio.get_running_loop().create_task(self._run_one(handle.claimed, handle))
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            if self._crash is None:
                self._crash = exc
            self.wake.poke()

    async def _let_go(self) -> None:
        """A run ending with jobs still held (its task cancelled, a crash) hands them back ready
        without an attempt spent, as a drain does at its deadline: bodies are stopped, claims on
        their way land and go back with the jobs that waited, and a settle write on its way may
        still commit. Within HAND_BACK_MS; the teardown after it leaves the rest to leases."""
        if not (self._inflight or self._claims):
            return
        for handle in list(self._inflight.values()):
            handle.stop("drain")

        async def hand_back() -> None:
            await self._hand_back_waiting()
            while self._tasks:
                await asyncio.wait(set(self._tasks))

        await within(self.clock, hand_back_ms(self.clock, self._hand_back_by), hand_back)

    async def _stop_for_close(self) -> None:
        """The client is closing: stop as stop() would and wait for the drain, so the jobs in
        flight settle (or go back) while the driver still answers; run() then raises
        DRIVER_CLOSED. Called from one of this worker's own jobs it only stops: waiting there
        would wait for itself."""
        if self._closed_under is None:
            self._closed_under = DriverClosedError(self.driver.kind)
        self.stop()
        if asyncio.current_task() not in self._tasks:
            await self._done.wait()

    async def _cancel_tasks(self) -> None:
        """Tear down every job task still running and wait for them."""
        if not self._tasks:
            return
        for handle in list(self._inflight.values()):
            handle.tear_down()
        await asyncio.wait(set(self._tasks))

    async def _run_one(self, claimed: ClaimedJob, handle: RunHandle) -> None:
        record = claimed.record
        handle.task = asyncio.current_task()
        started = False  # the body's run began (what fails after it is a settle's failure)
        try:
            if handle.torn:
                return  # torn down before it started: left to its lease
            definition = self.jobs.registry.get(record.name)
            if await self.gate.turned_away(claimed, definition, self._shed_delay_ms()):
                return
            if handle.reason == "drain":
                # The worker is going before this job began: back unharmed, never started.
                reason = "worker stopping before it started"
                await hand_back_unstarted(self.driver, self.events, claimed, reason)
                return
            started = True
            self._idle_started += 1
            await execute(self.runtime, claimed, definition, handle)
        except asyncio.CancelledError:
            if not handle.torn:  # cancelled from outside the worker, not torn down by it
                await hand_back_cancelled(self.driver, self.events, self.clock, claimed)
            raise
        except Exception as exc:
            say_unsettled(claimed, exc, started)
        finally:
            handle.body_done()  # when it never ran (shed, parked unknown name, failed input)
            self.caps.released(record.id)
            if self.caps.wake_due():
                self.wake.poke()  # a full cap's slot freed: the jobs its claims left alone are due
            self._inflight.pop(record.id, None)
            self.wake.slot_freed()

    def _shed_delay_ms(self) -> int:
        """A job shed at a cap keeps its place in line (no delay): this worker's claims leave its
        cap's jobs alone while the cap is full (CapRoom). Under run_until_idle() a batch that
        started no body (the cap held elsewhere) sheds for the poll, so the run ends."""
        if self._until_idle and self._idle_stalled:
            return self.poll_ms
        return 0

    async def _wait_for_work(self) -> None:
        """The loop's idle wait: new work or the poll, unless a reserved start came due while
        it was busy (`_wake_at_reserved_starts`)."""
        if self._rate_gate.came_due_while_busy():
            return
        try:
            await self.driver.wait_for_work(self.poll_ms)
        except DriverClosedError as closed:
            self._closed(closed)

    def _closed(self, closed: DriverClosedError) -> None:
        """The Jobs was closed under this worker: nothing it claims could be settled. It stops
        as stop() would, and run() raises `closed` once the drain is done."""
        self._closed_under = closed
        self.stop()

    @fixes_written
    async def publish_descriptors(self) -> None:
        """Publish the descriptors of the jobs registered here, so a process without their code
        can describe and enqueue them (a driver without the capability keeps none)."""
        await self.presence.publish_descriptors()
