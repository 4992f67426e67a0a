"""The worker: claims up to its free slots, runs each job through `execute`, and drains cleanly.

Limits are checked after the claim, against slots in the database, so they hold across machines;
a job over a cap is shed (stays ready, no attempt, no error). A drain stops claiming, lets
in-flight jobs finish until its deadline, then hands the rest back unharmed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from engine.errors import InvalidArgumentError, JobsError, JobSlotLostError
from engine.execute import RunHandle, Runtime, execute, keep_leases
from engine.ids import worker_id as new_worker_id
from engine.limits import Limits
from engine.observe import Listener, WorkerEvent, WorkerEventKind, log_listener, log_wants
from engine.outbox import OutboxRelay
from engine.tasks.scheduler import Scheduler
from schemas.jobs import ClaimedJob, NackOptions
from schemas.stats import WorkerInfo

if TYPE_CHECKING:
    from engine.client import Jobs

logger = logging.getLogger("mcp_jobs.worker")

DEFAULT_LEASE_MS = 30_000
DEFAULT_POLL_MS = 500
PRESENCE_MS = 10_000


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
        listeners: Sequence[Listener] = (),
        worker_id: str | None = None,
        scheduler: bool = True,
        outbox_relay: bool = True,
    ) -> None:
        for name, value in (("concurrency", concurrency), ("lease_ms", lease_ms)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(name, value, "a whole number ≥ 1")
        self.jobs = jobs
        self.driver = jobs.driver
        self.clock = jobs.clock
        self.concurrency = concurrency
        self.queues = list(queues) if queues else None
        self.limits = limits or Limits()
        self.lease_ms = lease_ms
        self.poll_ms = poll_ms
        self.drain_ms = drain_ms
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
                backlog = False
                while not self._stopping:
                    if self._crash is not None:
                        raise self._crash
                    free = self._free_slots()
                    # With a backlog, wait until a quarter of the slots are free and claim them
                    # in one round trip, rather than one claim per job as each slot frees.
                    if free >= (self._claim_batch if backlog else 1):
                        batch = await self._claim(free)
                        for claimed in batch:
                            self._start(claimed)
                        backlog = len(batch) == free
                        if backlog:
                            continue  # the queue may hold more: claim again before waiting
                        if batch:
                            # A quiet queue: let the new jobs begin before this loop sets up
                            # its wait, since a job's latency is measured to its start.
                            await asyncio.sleep(0)
                        await self._race(lambda: self.driver.wait_for_work(self.poll_ms))
                    else:
                        await self._race()
                await self._finish_inflight()
                if self._crash is not None:
                    raise self._crash
                for service in self._services():
                    await service.wait_stopped()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
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
                        self._start(claimed)
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
        return min(self.concurrency - self._bodies, 2 * self.concurrency - len(self._inflight))

    def _body_done(self) -> None:
        self._bodies -= 1
        self._slot_freed()

    def _start(self, claimed: ClaimedJob) -> None:
        """Run one claimed job in a task of its own.

        A plain asyncio task rather than an anyio task group child: anyio spends a cancel
        scope, an event and a wrapper coroutine on each child, a sizeable share of a no-op
        job's cost. The structure a task group gives is kept by hand: the worker tears down and
        awaits every job task before `run()` returns (`RunHandle.tear_down`: shields in a body
        still hold), and a BaseException escaping a job ends the worker as it would have
        through the group."""
        handle = RunHandle(claimed)
        self._inflight[claimed.record.id] = handle
        self._bodies += 1
        handle.on_body_done = self._body_done
        task = asyncio.get_running_loop().create_task(self._run_one(claimed, handle))
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
                        await self._shed(claimed, blocked)
                        return
            await execute(self.runtime, claimed, definition, handle)
        except Exception:
            logger.exception("job %s (%s) could not be settled", record.id, record.name)
        finally:
            handle.body_done()  # when it never ran (shed, parked unknown name, failed input)
            self._inflight.pop(record.id, None)
            self._slot_freed()

    async def _shed(self, claimed: ClaimedJob, blocked_by: str) -> None:
        """Over a cap: hand it straight back. Not parked and no `last_error` — it is a job still
        waiting, and depth and oldest-ready age must keep seeing it (rule 7)."""
        try:
            await self.driver.nack(
                claimed.record.id,
                claimed.token,
                NackOptions(delay_ms=self.poll_ms, counts_as_attempt=False),
            )
        except JobSlotLostError:
            return
        self._emit(
            WorkerEvent.of(
                "shed",
                claimed.record,
                at=self.clock.now_ms(),
                worker_id=self.id,
                reason=f"at cap {blocked_by}",
            )
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
