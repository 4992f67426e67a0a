"""What runs beside a worker's jobs, so a deploy needs no extra process: the cron scheduler
(a lease per task), the outbox relay and the pruner (one worker at a time, under the prune
lease). Which of them run is chosen here; all of them stop with the worker.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from engine.clock import Clock
from engine.drivers.base import HISTORY, LEADER_LEASES, OUTBOX
from engine.errors import JobsError
from engine.outbox import OutboxRelay
from engine.pruner import Pruner
from engine.retention import Retention, prune_enabled_from_env
from engine.services import attempt
from engine.tasks.declare import tasks_of
from engine.tasks.scheduler import Scheduler
from engine.worker_presence import PRESENCE_MS

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from engine.client import Jobs

logger = logging.getLogger("mcp_jobs.worker")

# How many times a second stop cancels a service that runs on (each turn's `finally` may await).
CUT_TRIES = 10


class WorkerServices:
    """The services of one worker. `scheduler` / `outbox_relay`: None runs the scheduler only
    when tasks are registered, and the relay only when the outbox is in use (this process staged
    a job, or rows were waiting when the worker started); True or False decides. `prune`: None
    prunes unless the driver cannot or MCP_JOBS_PRUNE=off."""

    def __init__(
        self,
        jobs: Jobs,
        scheduler: bool | None,
        outbox_relay: bool | None,
        prune: bool | None,
        retention: Retention | None,
    ) -> None:
        self.jobs = jobs
        self._want_scheduler = scheduler
        self._want_relay = outbox_relay
        self.scheduler: Scheduler | None = None
        relay = outbox_relay if outbox_relay is not None else jobs.outbox_in_use
        self.outbox_relay: OutboxRelay | None = OutboxRelay(jobs) if relay else None
        self.choose_scheduler()
        self.pruner: Pruner | None = None
        driver = jobs.driver
        offered = HISTORY.offered_by(driver) and LEADER_LEASES.offered_by(driver)
        if prune or (prune is None and offered and prune_enabled_from_env()):
            self.pruner = Pruner(jobs, retention=retention)
        # The task group of the run now going, None between runs; and whether the worker stops.
        self._group: TaskGroup | None = None
        self._stopping = False
        # The tasks running a service now, and those a second stop cut short (`cut_at`).
        self._tasks: dict[asyncio.Task[Any], Scheduler | OutboxRelay | Pruner] = {}
        self._cutting: asyncio.Task[None] | None = None
        self.cut: list[Scheduler | OutboxRelay | Pruner] = []

    def running(self) -> list[Scheduler | OutboxRelay | Pruner]:
        return [s for s in (self.scheduler, self.outbox_relay, self.pruner) if s is not None]

    def choose_scheduler(self) -> None:
        wanted = self._want_scheduler
        if wanted is None:
            wanted = len(tasks_of(self.jobs.registry)) > 0
        if wanted and self.scheduler is None:
            self.scheduler = Scheduler(self.jobs)

    async def choose(self, worker_id: str, claims_nothing: bool) -> None:
        """Choose the services of the run about to start. A worker that claims nothing
        (`claims_nothing`) and runs no scheduler would do nothing at all: it says so."""
        self.choose_scheduler()
        if claims_nothing and self.scheduler is None:
            # Most often the app module that declares the jobs was never imported.
            logger.warning(
                "worker %s has no jobs registered, so it claims nothing: import the "
                "modules that declare them before it starts (mcp-jobs worker --app MODULE), "
                'or name its queues (queues=[...], or queues="*")',
                worker_id,
            )
        await self.choose_relay()

    async def choose_relay(self) -> None:
        """With `outbox_relay=None`, a relay runs when the outbox is in use: this process staged
        a job, or the first pass (made here) found rows waiting."""
        if self.outbox_relay is not None or self._want_relay is False:
            return
        relay = OutboxRelay(self.jobs)
        if not self.jobs.outbox_in_use:
            try:
                if await relay.pass_once() is None:
                    return
            except JobsError as exc:
                logger.warning("outbox not checked, no relay started: %s", exc)
                return
        self.outbox_relay = relay

    async def publish_staged(self) -> None:
        """For `run_until_idle()`: publish what the outbox holds committed, as a running relay
        would (its jobs are then due too), unless `outbox_relay=False` turned relaying off."""
        if self._want_relay is False or not OUTBOX.offered_by(self.jobs.driver):
            return
        await (self.outbox_relay or OutboxRelay(self.jobs)).run_until_empty()

    def start(self, tg: TaskGroup) -> None:
        """Run the services chosen in `tg`, the run's task group; with `outbox_relay=None` and no
        relay yet, one starts there at the first sign the outbox is in use."""
        self._group = tg
        if self._stopping:  # stopped while the run set up: a service made since stops too
            self.stop()
        for service in self.running():
            tg.start_soon(self._run, service)
        if self.outbox_relay is None and self._want_relay is None:
            # The first job this process stages starts a relay beside the loop, and so does a
            # row another process staged, seen by a check every PRESENCE_MS.
            self.jobs.on_first_stage(partial(self._start_relay, tg))
            tg.start_soon(self._watch_outbox, tg)

    async def _watch_outbox(self, tg: TaskGroup) -> None:
        """Until a relay runs here, publish what other processes staged once per PRESENCE_MS,
        and start the relay at the first row found."""
        probe = OutboxRelay(self.jobs)
        while self.outbox_relay is None:
            await self.jobs.clock.sleep_ms(PRESENCE_MS)
            if self.outbox_relay is not None:
                return
            found = await attempt("outbox check", logger, probe.pass_once)
            if found is not None:
                self._start_relay(tg)

    def _start_relay(self, tg: TaskGroup) -> None:
        # `tg` is the run that asked: a hook left by an earlier run of this worker does nothing.
        if self.outbox_relay is None and tg is self._group and not self._stopping:
            self.outbox_relay = OutboxRelay(self.jobs)
            tg.start_soon(self._run, self.outbox_relay)

    async def _run(self, service: Scheduler | OutboxRelay | Pruner) -> None:
        """`service.run()`, in a task `cut_at` may cut short: the one cancellation that reaches
        through the shield its lease's release runs under (anyio shields the run's own)."""
        task = asyncio.current_task()
        assert task is not None
        self._tasks[task] = service
        try:
            await service.run()
        except asyncio.CancelledError:
            if service not in self.cut:
                raise
            while task.cancelling():
                task.uncancel()  # cut short by `cut_at`: the worker goes on with its teardown
        finally:
            del self._tasks[task]

    def cut_at(self, clock: Clock, deadline_ms: int) -> None:
        """A second stop: a service still running (a lease's release waiting for a database
        away) at `deadline_ms` on `clock` is cut short there, its lease left to run out."""
        if self._cutting is None:
            cutting = self._cut(clock, deadline_ms)
            self._cutting = asyncio.get_running_loop().create_task(cutting)

    async def _cut(self, clock: Clock, deadline_ms: int) -> None:
        await clock.sleep_ms(deadline_ms - clock.now_ms())
        # Again while one runs on: cut in a turn, its release begins (shielded) and is cut too.
        for _ in range(CUT_TRIES):
            if not self._tasks:
                return
            for task, service in list(self._tasks.items()):
                if service not in self.cut:
                    self.cut.append(service)
                task.cancel()
            await asyncio.sleep(0)

    def cut_said(self) -> list[str]:
        """What the services cut short left to run out, for the second stop's last line."""
        said: list[str] = []
        for service in self.cut:
            if isinstance(service, Scheduler):
                lease = f"the scheduler's task leases run out within {service.lease_ms // 1000} s"
                said.append(lease)
            elif isinstance(service, Pruner):
                said.append(f"the prune lease runs out within {service.lease_ms // 1000} s")
        return said

    def stop(self) -> None:
        self._stopping = True
        for service in self.running():
            service.stop()

    async def wait_stopped(self) -> None:
        for service in self.running():
            await service.wait_stopped()

    def rearm(self) -> None:
        """The run is over: the next one starts each service afresh."""
        self._group = None
        self._stopping = False
        if self._cutting is not None:
            self._cutting.cancel()
            self._cutting = None
        self.cut = []
        for service in self.running():
            service.rearm()
