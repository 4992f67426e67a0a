"""The worker: claims up to its free slots, runs each job through `execute`, and drains cleanly.

Limits are checked after the claim, against slots in the database, so they hold across machines;
a job over a cap is shed (stays ready, no attempt, no error). A drain stops claiming, lets
in-flight jobs finish until its deadline, then hands the rest back unharmed.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from engine.errors import InvalidArgumentError, JobsError, JobSlotLostError
from engine.execute import RunHandle, Runtime, execute, keep_leases
from engine.ids import worker_id as new_worker_id
from engine.limits import Limits
from engine.observe import Listener, WorkerEvent, log_listener
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
        self._claim_batch = max(1, concurrency // 4)
        self._stopping = False
        self._drain_deadline = 0
        self._nudge = anyio.Event()
        self._done = anyio.Event()
        self._started_at = self.clock.now_ms()
        self.runtime = Runtime(
            driver=self.driver,
            clock=self.clock,
            worker_id=self.id,
            lease_ms=lease_ms,
            emit=self._emit,
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

    def _poke(self) -> None:
        self._nudge.set()
        self._nudge = anyio.Event()

    @property
    def in_flight(self) -> int:
        return len(self._inflight)

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Claim and run jobs until `stop()`/`drain()`, then finish or hand back in-flight work."""
        if self._done.is_set():  # a second run() of the same worker
            self._done = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._presence)
                tg.start_soon(self._keep_leases)
                for service in self._services():
                    tg.start_soon(service.run)
                backlog = False
                while not self._stopping:
                    free = self.concurrency - len(self._inflight)
                    # With a backlog, wait until a quarter of the slots are free and claim them
                    # in one round trip, rather than one claim per job as each slot frees.
                    if free >= (self._claim_batch if backlog else 1):
                        batch = await self._claim(free)
                        for claimed in batch:
                            self._start(tg, claimed)
                        backlog = len(batch) == free
                        if backlog:
                            continue  # the queue may hold more: claim again before waiting
                        await self._race(lambda: self.driver.wait_for_work(self.poll_ms))
                    else:
                        await self._race()
                await self._finish_inflight()
                for service in self._services():
                    await service.wait_stopped()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
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
                async with anyio.create_task_group() as running:
                    for claimed in batch:
                        self._start(running, claimed)
                tg.cancel_scope.cancel()

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

    async def _race(self, *waits: Callable[[], Awaitable[None]]) -> None:
        """Wait for the first of `waits`, a freed slot, or `stop()`."""
        nudge = self._nudge
        if self._stopping:
            return
        async with anyio.create_task_group() as tg:

            async def first(wait: Callable[[], Awaitable[None]]) -> None:
                await wait()
                tg.cancel_scope.cancel()

            for wait in (nudge.wait, *waits):
                tg.start_soon(first, wait)

    async def _keep_leases(self) -> None:
        while True:
            await self.clock.sleep_ms(max(1, self.lease_ms // 3))
            await keep_leases(self.runtime, self._inflight.values())

    def _start(self, tg: TaskGroup, claimed: ClaimedJob) -> None:
        handle = RunHandle(claimed)
        self._inflight[claimed.record.id] = handle
        tg.start_soon(self._run_one, claimed, handle)

    async def _run_one(self, claimed: ClaimedJob, handle: RunHandle) -> None:
        record = claimed.record
        try:
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
            self._inflight.pop(record.id, None)
            self._poke()

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
