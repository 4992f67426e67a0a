"""The worker: claims up to its free slots, runs each job through `execute`, and drains cleanly.

With a backlog it claims ahead: up to `prefetch` claimed jobs wait in the worker for a slot,
and two claims may be on their way at once, so the database prepares the next wave while this
process runs the last. Jobs that wait are the worker's (leases kept, a cancel heard); a stopping
worker hands them back unharmed, and jobs that run long are not claimed ahead at all.

Limits are checked after the claim, against slots in the database, so they hold across machines;
a job over a cap is shed (stays ready, no attempt, no error). A drain stops claiming, lets
in-flight jobs finish until its deadline, then hands the rest back unharmed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from engine.errors import InvalidArgumentError, JobsError, JobSlotLostError
from engine.execute import RunHandle, Runtime, execute, keep_leases
from engine.ids import worker_id as new_worker_id
from engine.limits import Limits
from engine.observe import Listener, WorkerEvent, WorkerEventKind, log_listener, log_wants
from engine.outbox import OutboxRelay
from engine.tasks.scheduler import Scheduler
from schemas.jobs import ClaimedJob, JobRecord, NackOptions
from schemas.stats import WorkerInfo

if TYPE_CHECKING:
    from engine.client import Jobs

logger = logging.getLogger("mcp_jobs.worker")

DEFAULT_LEASE_MS = 30_000
DEFAULT_POLL_MS = 500
PRESENCE_MS = 10_000
# With a backlog, this many claims may be on their way at once. One claim at a time leaves the
# slots idle for its round trip after every wave of short jobs; a second one in flight lets
# PostgreSQL work on the next wave while this process runs the last. In-process drains of
# 20,000 no-op jobs on PostgreSQL, three alternated pairs: 4,018-4,976 jobs/s claiming only for
# free slots, one claim at a time; 5,057-6,297 claiming ahead.
CLAIMS_IN_FLIGHT = 2
# Jobs claimed ahead wait for a slot; a worker claims ahead only as many as its slots are
# expected to start within this long, judged by how long its recent bodies ran. Jobs of a
# second or more are not claimed ahead at all, so a busy worker does not sit on work another
# worker could start now.
PREFETCH_HORIZON_MS = 50
# Claimed jobs that may wait for a slot, by default, for each slot.
PREFETCH_PER_SLOT = 2
# Weight of the newest body's duration in the running mean.
BODY_MS_WEIGHT = 0.1


class Worker:
    """Runs the jobs registered in this process. `await Worker(jobs).run()`."""

    def __init__(
        self,
        jobs: Jobs,
        *,
        concurrency: int = 16,
        queues: Sequence[str] | None = None,
        limits: Limits | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
        poll_ms: int = DEFAULT_POLL_MS,
        drain_ms: int = 30_000,
        prefetch: int | None = None,
        listeners: Sequence[Listener] = (),
        worker_id: str | None = None,
        scheduler: bool = True,
        outbox_relay: bool = True,
    ) -> None:
        for name, value in (("concurrency", concurrency), ("lease_ms", lease_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(name, value, "a whole number ≥ 1")
        if prefetch is None:
            prefetch = PREFETCH_PER_SLOT * concurrency
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise InvalidArgumentError("prefetch", prefetch, "a whole number ≥ 0")
        self.jobs = jobs
        self.driver = jobs.driver
        self.clock = jobs.clock
        self.concurrency = concurrency
        self.queues = list(queues) if queues else None
        self.limits = limits or Limits()
        self.lease_ms = lease_ms
        self.poll_ms = poll_ms
        self.drain_ms = drain_ms
        # How many claimed jobs may wait here for a slot (0: claim only for free slots).
        self.prefetch = prefetch
        self.id = worker_id or new_worker_id()
        self._listeners: list[Listener] = [log_listener, *listeners]
        self._inflight: dict[str, RunHandle] = {}
        # Job tasks are plain asyncio tasks, each under a cancel scope of its own (see _start).
        self._tasks: set[asyncio.Task[None]] = set()
        self._crash: BaseException | None = None
        self._claim_batch = max(1, concurrency // 4)
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
        # Running mean of body durations (ms, on the injected clock): sizes the claim-ahead.
        self._body_ms = 0.0
        self._stopping = False
        self._drain_deadline = 0
        # Plain asyncio: the engine runs on asyncio (the PostgreSQL driver needs it), and an
        # anyio.Event costs a backend lookup on every job that finishes.
        self._nudge = asyncio.Event()
        # The loop's task while it waits for work; a poke takes it (and cancels it).
        self._idle_task: asyncio.Task[Any] | None = None
        self._done = anyio.Event()
        self._started_at = self.clock.now_ms()
        self.runtime = Runtime(
            driver=self.driver,
            clock=self.clock,
            worker_id=self.id,
            lease_ms=lease_ms,
            emit=self._emit,
            wants=self._wants,
        )
        # In-process services, so a deploy needs no extra process: the cron scheduler (one
        # leader across all workers) and the outbox relay. Both stop with the worker.
        self.scheduler = Scheduler(jobs) if scheduler else None
        self.outbox_relay = OutboxRelay(jobs) if outbox_relay else None

    # --- events -------------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _emit(self, event: WorkerEvent) -> None:
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("worker listener failed on %s", event.kind)

    def _wants(self, kind: WorkerEventKind) -> bool:
        """Whether an event of `kind` has anyone to go to: with only the log listener and its
        level off (claimed/succeeded are DEBUG), the event is not even built."""
        return len(self._listeners) > 1 or log_wants(kind)

    def _poke(self) -> None:
        """Wake the loop wherever it waits: stop(), a crashed job."""
        self._slot_freed()
        task, self._idle_task = self._idle_task, None
        if task is not None:
            task.cancel()

    def _slot_freed(self) -> None:
        """Wake the loop if it waits for a slot (or for the last in-flight job to settle). A loop
        waiting for work sleeps on: its last claim found less than it had room for, and a freed
        slot makes no new work (new work sends its own wake-up). Waking it would cost an empty
        claim after every job of a quiet queue, and anyio's cancel formats the current task's
        repr each time, on the path of the next job's pickup."""
        self._nudge.set()
        self._nudge = asyncio.Event()

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Claim and run jobs until `stop()`/`drain()`, then finish or hand back in-flight work."""
        if self._done.is_set():  # a second run() of the same worker
            self._done = anyio.Event()
        self._crash = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._presence)
                tg.start_soon(self._keep_leases)
                for service in self._services():
                    tg.start_soon(service.run)
                self._backlog = False
                while not self._stopping:
                    if self._crash is not None:
                        raise self._crash
                    self._start_waiting()
                    if self._backlog:
                        # Claim for the slots about to free (and the jobs that may wait for
                        # them) without waiting for the claim: its jobs join `_waiting`.
                        ask = self._claim_room()
                        if ask >= self._claim_batch and len(self._claims) < CLAIMS_IN_FLIGHT:
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
                    for claimed in batch:
                        self._start(self._hold(claimed))
                    self._backlog = len(batch) == free
                    if self._backlog:
                        continue  # the queue may hold more: claim again before waiting
                    if batch:
                        # A quiet queue: let the new jobs begin before this loop sets up its
                        # wait, since a job's latency is measured to its start.
                        await asyncio.sleep(0)
                    await self._race(lambda: self.driver.wait_for_work(self.poll_ms))
                await self._hand_back_waiting()
                await self._finish_inflight()
                if self._crash is not None:
                    raise self._crash
                for service in self._services():
                    await service.wait_stopped()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._cancel_claims()
                await self._cancel_tasks()
                try:
                    await self.driver.worker_gone(self.id)
                except JobsError:
                    logger.warning("worker %s could not deregister", self.id)
            self._done.set()

    async def run_until_idle(self) -> int:
        """Run every job that is due now, then return how many were claimed. For scripts and
        tests; `run()` is the long-lived loop."""
        total = 0
        while True:
            batch = await self.driver.claim(self.id, self.concurrency, self.lease_ms, self.queues)
            if not batch:
                return total
            total += len(batch)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._keep_leases)
                try:
                    for claimed in batch:
                        self._start(self._hold(claimed))
                    if self._tasks:
                        await asyncio.wait(set(self._tasks))
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._cancel_tasks()
                tg.cancel_scope.cancel()
            if self._crash is not None:
                crash, self._crash = self._crash, None
                raise crash

    def stop(self) -> None:
        """Stop claiming; `run()` returns once in-flight jobs finish or the drain deadline hands
        them back."""
        if not self._stopping:
            self._stopping = True
            self._drain_deadline = self.clock.now_ms() + self.drain_ms
        for service in self._services():
            service.stop()
        self._poke()

    def _services(self) -> list[Scheduler | OutboxRelay]:
        return [s for s in (self.scheduler, self.outbox_relay) if s is not None]

    async def drain(self) -> None:
        self.stop()
        await self._done.wait()

    async def _claim(self, free: int) -> list[ClaimedJob]:
        try:
            return await self.driver.claim(self.id, free, self.lease_ms, self.queues)
        except JobsError as exc:
            logger.warning("claim failed, retrying after %d ms: %s", self.poll_ms, exc)
            await self._race(lambda: self.clock.sleep_ms(self.poll_ms))
            return []

    async def _race(self, wait: Callable[[], Awaitable[None]] | None = None) -> None:
        """Wait for `wait` (work, when given) to return, or without one for a freed slot; `stop()`
        or a crashed job ends either (`_poke`).

        A poke cancels the waiting task and this swallows exactly that cancellation (asyncio's
        own count of requests tells it from anyone else's): the way `asyncio.timeout` ends a
        wait, where an anyio cancel scope cost ~9 µs on every idle wake-up, on the path of the
        next job's pickup. No task group either. Nothing awaits between the `_stopping` check
        and the wait starting, so a poke cannot fall in between unseen."""
        if self._stopping:
            return
        if wait is None:
            await self._nudge.wait()
            return
        task = asyncio.current_task()
        assert task is not None
        self._idle_task = task
        try:
            await wait()
        except asyncio.CancelledError:
            poked = self._idle_task is None  # the poke took the task before cancelling it
            if not poked or task.uncancel() > 0:
                raise  # not (only) the poke: a stop from outside, the worker's own teardown
        finally:
            self._idle_task = None

    async def _keep_leases(self) -> None:
        while True:
            await self.clock.sleep_ms(max(1, self.lease_ms // 3))
            await keep_leases(self.runtime, self._inflight.values())

    def _free_slots(self) -> int:
        """Slots for bodies now, bounded so that no more than `concurrency` settle writes are on
        their way at once."""
        settling = len(self._inflight) - self._bodies - len(self._waiting)
        return min(self.concurrency - self._bodies, 2 * self.concurrency - self._bodies - settling)

    def _claim_room(self) -> int:
        """How many jobs a claim made now may ask for: the free slots, plus as many as may wait
        for one (`_prefetch_now`), less what is waiting already or asked for by claims on their
        way. One claim asks for at most `concurrency`, and no more than `concurrency` settle
        writes may be on their way besides."""
        prefetch = self._prefetch_now()
        held = len(self._inflight) + self._claiming
        room = self.concurrency - self._bodies + prefetch - len(self._waiting) - self._claiming
        return min(room, self.concurrency, 2 * self.concurrency + prefetch - held)

    def _prefetch_now(self) -> int:
        """Jobs that may wait for a slot: as many as the slots are expected to start within
        PREFETCH_HORIZON_MS at the recent bodies' pace, at most `prefetch`."""
        if self._body_ms <= 0:
            return self.prefetch
        expected = int(self.concurrency * PREFETCH_HORIZON_MS / self._body_ms)
        return min(self.prefetch, expected)

    def _claim_ahead(self, ask: int) -> None:
        self._claiming += ask
        task = asyncio.get_running_loop().create_task(self._claim_quietly(ask))
        self._claims.add(task)
        task.add_done_callback(partial(self._claim_landed, ask))

    async def _claim_quietly(self, ask: int) -> list[ClaimedJob]:
        """A claim ahead: a failure ends the backlog and the loop's own claim, which waits before
        it retries, takes over."""
        try:
            return await self.driver.claim(self.id, ask, self.lease_ms, self.queues)
        except JobsError as exc:
            logger.warning("claim failed: %s", exc)
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
            self._poke()
            return
        batch = task.result()
        for claimed in batch:
            self._waiting.append(self._hold(claimed))
        if len(batch) < ask:
            self._backlog = False  # the queue ran dry: back to waiting for work
        self._slot_freed()

    def _start_waiting(self) -> None:
        while self._waiting and self._free_slots() > 0:
            handle = self._waiting.popleft()
            if handle.reason is None:
                self._start(handle)
                continue
            # Cancelled by an operator, or its lease lost, while it waited: it never starts.
            record = handle.claimed.record
            self._inflight.pop(record.id, None)
            kind: WorkerEventKind = "cancelled" if handle.reason == "cancelled" else "lease_lost"
            self._emit_about(kind, record, f"{handle.reason} before it started")

    async def _cancel_claims(self) -> None:
        """Claims still on their way when the worker goes: their jobs' leases hand them on."""
        for task in self._claims:
            task.cancel()
        if self._claims:
            await asyncio.wait(set(self._claims))

    async def _hand_back_waiting(self) -> None:
        """A stopping worker returns the jobs it claimed ahead and never started: the claims on
        their way land first, then each goes back ready, without an attempt spent."""
        while self._claims:
            await asyncio.wait(set(self._claims))
        waiting, self._waiting = list(self._waiting), deque()

        async def hand_back(handle: RunHandle) -> None:
            record = handle.claimed.record
            try:
                await self._give_back(
                    handle.claimed,
                    NackOptions(counts_as_attempt=False),
                    "handed_back",
                    "worker stopping before it started",
                )
            except JobsError as exc:
                logger.warning("job %s not handed back, its lease will: %s", record.id, exc)
            finally:
                self._inflight.pop(record.id, None)

        if waiting:
            async with anyio.create_task_group() as tg:
                for handle in waiting:
                    tg.start_soon(hand_back, handle)

    def _body_done(self, handle: RunHandle) -> None:
        self._bodies -= 1
        self._body_ms += (self.clock.now_ms() - handle.started_ms - self._body_ms) * BODY_MS_WEIGHT
        self._slot_freed()

    def _hold(self, claimed: ClaimedJob) -> RunHandle:
        """Take a claimed job into the worker's care (heartbeats, drain) before it starts."""
        handle = RunHandle(claimed)
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
            self._poke()

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
        try:
            if handle.torn:
                return  # torn down before it started: left to its lease
            definition = self.jobs.registry.get(record.name)
            if definition is not None:
                caps = self.limits.caps_for(
                    record.queue, record.tenant_id, record.name, definition.concurrency
                )
                if caps:
                    blocked = await self.driver.acquire_slots(
                        record.id, caps, claimed.lease_expires_at
                    )
                    if blocked is not None:
                        # Over a cap: straight back, not parked and no `last_error` — a job
                        # still waiting, that depth and oldest-ready age must keep seeing (rule 7).
                        await self._give_back(
                            claimed,
                            NackOptions(delay_ms=self.poll_ms, counts_as_attempt=False),
                            "shed",
                            f"at cap {blocked}",
                        )
                        return
            await execute(self.runtime, claimed, definition, handle)
        except Exception:
            logger.exception("job %s (%s) could not be settled", record.id, record.name)
        finally:
            handle.body_done()  # when it never ran (shed, parked unknown name, failed input)
            self._inflight.pop(record.id, None)
            self._slot_freed()

    async def _give_back(
        self, claimed: ClaimedJob, options: NackOptions, kind: WorkerEventKind, reason: str
    ) -> None:
        """Return a claimed job this worker will not run, and say so. One cancelled or taken
        meanwhile is no longer ours to return: nothing is said."""
        try:
            await self.driver.nack(claimed.record.id, claimed.token, options)
        except JobSlotLostError:
            return
        self._emit_about(kind, claimed.record, reason)

    def _emit_about(self, kind: WorkerEventKind, record: JobRecord, reason: str) -> None:
        self._emit(
            WorkerEvent.of(kind, record, at=self.clock.now_ms(), worker_id=self.id, reason=reason)
        )

    async def _finish_inflight(self) -> None:
        if not self._inflight:
            return
        async with anyio.create_task_group() as tg:

            async def deadline() -> None:
                # Measured from the moment stop() was called, not from when this task started.
                await self.clock.sleep_ms(self._drain_deadline - self.clock.now_ms())
                for handle in list(self._inflight.values()):
                    handle.stop("drain")

            async def settled() -> None:
                while self._inflight:
                    await self._nudge.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(deadline)
            tg.start_soon(settled)

    async def _presence(self) -> None:
        while True:
            try:
                await self.driver.worker_seen(
                    WorkerInfo(
                        id=self.id,
                        hostname=socket.gethostname(),
                        pid=os.getpid(),
                        queues=self.queues,
                        concurrency=self.concurrency,
                        started_at=self._started_at,
                        last_seen_at=self.clock.now_ms(),
                    )
                )
            except JobsError as exc:
                logger.warning("worker presence not recorded: %s", exc)
            await self.clock.sleep_ms(PRESENCE_MS)
