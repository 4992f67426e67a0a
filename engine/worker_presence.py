"""A worker's presence in the database: a beat every PRESENCE_MS that says it is alive (what
`queue_stats` and `diagnose_queue` count as live workers) until it leaves, and, at the first beat
and every PUBLISH_EVERY_BEATS after, the descriptors of the jobs it runs (engine.descriptors), so
a process without their code can describe and enqueue them."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from engine.descriptors import PUBLISH_EVERY_BEATS, app_modules
from engine.drivers.base import DESCRIPTORS, DescriptorStore, require
from engine.errors import JobsError
from engine.pruner import Pruner, declared_retention, worker_policy
from engine.retention import Policy, Retention, RetentionSettingInvalidError
from engine.services import attempt
from engine.tasks.published import describe_all, scheduling_marked
from engine.worker_outage import noted_failure, noted_success
from schemas.descriptor import JobDescriptor
from schemas.stats import WorkerInfo

if TYPE_CHECKING:
    from engine.client import Jobs

logger = logging.getLogger("mcp_jobs.worker")

PRESENCE_MS = 10_000
# A worker that has not checked in for three presence beats is gone (diagnose_queue, the
# metrics gauge and a deregistration that failed all count by it).
LIVE_WORKER_WINDOW_MS = 3 * PRESENCE_MS
# After a beat the database refused: the next is tried this soon, so a worker riding out a
# short outage (a restart, a failover) counts as live again within a second of the database's
# return, not a whole beat; past FAST_RETRIES_MS of failures, at the beat's own pace again.
RETRY_BEAT_MS = 1_000
FAST_RETRIES_MS = 60_000


class Presence:
    """The beats of worker `worker_id`. `queues` says what it claims from now; `retention` is
    the policy its descriptors carry (None: none published); `apps` the modules named with them
    (None: those that declare the jobs); `scheduling` whether it runs the cron scheduler now."""

    def __init__(
        self,
        jobs: Jobs,
        worker_id: str,
        queues: Callable[[], list[str] | None],
        concurrency: int,
        retention: Policy | None,
        apps: Sequence[str] | None,
        *,
        scheduling: Callable[[], bool] = lambda: True,
        caps: dict[str, int] | None = None,
    ) -> None:
        self.jobs = jobs
        self.scheduling = scheduling
        self.worker_id = worker_id
        self.queues = queues
        self.concurrency = concurrency
        self.caps = caps
        self.retention = retention
        self.apps = None if apps is None else [*apps]
        self.started_at = jobs.clock.now_ms()
        driver = jobs.driver
        self.store: DescriptorStore | None = (
            require(driver, DESCRIPTORS) if DESCRIPTORS.offered_by(driver) else None
        )
        self._described: tuple[tuple[str, ...], list[JobDescriptor]] | None = None
        # Set at the first beat the database took: from then on, readings count this worker.
        self.checked_in = asyncio.Event()

    async def run(self) -> None:
        beat = 0
        failing_since: int | None = None
        while True:
            publish = beat % PUBLISH_EVERY_BEATS == 0
            beat += 1
            taken = await attempt("worker presence beat", logger, partial(self.beat, publish))
            now = self.jobs.clock.now_ms()
            failing_since = None if taken else now if failing_since is None else failing_since
            soon = failing_since is not None and now - failing_since < FAST_RETRIES_MS
            await self.jobs.clock.sleep_ms(RETRY_BEAT_MS if soon else PRESENCE_MS)

    async def beat(self, publish: bool) -> bool:
        """One beat (`publish`: with the descriptors); True once the database took it."""
        if publish:
            await self.publish_descriptors()
        info = WorkerInfo(
            id=self.worker_id,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            queues=self.queues(),
            concurrency=self.concurrency,
            started_at=self.started_at,
            last_seen_at=self.jobs.clock.now_ms(),
            caps=self.caps,
        )
        await self.jobs.driver.worker_seen(info)
        self.checked_in.set()
        return True

    async def leave(self, said: bool = True) -> JobsError | None:
        """The worker is gone: take its presence out now rather than let its beats lapse.
        Answers why not (None: taken out), said in a line of its own unless `said` is False."""
        try:
            await self.jobs.driver.worker_gone(self.worker_id)
        except JobsError as exc:
            if said:
                logger.warning("worker %s %s", self.worker_id, not_left(exc))
            return exc
        return None

    def descriptors(self) -> list[JobDescriptor]:
        """The descriptors of the jobs registered, built again only when the registry changed."""
        registry = self.jobs.registry
        names = tuple(registry.names())
        if self._described is None or self._described[0] != names:
            apps = self.apps if self.apps is not None else app_modules(registry)
            retention = None
            if self.retention is not None:
                retention = declared_retention(registry, self.retention)
            self._described = (names, describe_all(registry, apps, retention))
        return self._described[1]

    async def publish_descriptors(self) -> None:
        """Publish the descriptors of the jobs registered (a driver without the capability
        keeps none)."""
        if self.store is None:
            return
        descriptors = self.descriptors()
        if not descriptors:
            return
        now = self.jobs.clock.now_ms()
        try:
            if any(d.tasks for d in descriptors):
                descriptors = await self._marked(descriptors, now)
            await self.store.publish_descriptors(self.worker_id, descriptors, now)
        except JobsError as exc:
            if not noted_failure("job descriptors publish", exc):
                logger.warning("job descriptors not published: %s", exc)
            return
        noted_success("job descriptors publish")

    async def _marked(self, descriptors: list[JobDescriptor], now: int) -> list[JobDescriptor]:
        """`descriptors` with their tasks stamped as this worker schedules them: now, or (no
        scheduler here) as the stored rows say, so the worker that fires them stays seen."""
        assert self.store is not None
        if self.scheduling():
            return scheduling_marked(descriptors, now, [])
        return scheduling_marked(descriptors, None, await self.store.published_descriptors())


def published_policy(pruner: Pruner | None, retention: Retention | None) -> Policy | None:
    """The retention a worker publishes with its jobs' descriptors: its pruner's, else the one
    it declares, so the worker that prunes (and a prune by hand) keeps what this one declares;
    None (nothing published) when the environment's is not a duration, which only a pruning
    worker refuses to start with."""
    if pruner is not None:
        return pruner.policy
    try:
        return worker_policy(retention)
    except RetentionSettingInvalidError as exc:
        logger.warning("job retention not published: %s", exc)
        return None


def not_left(exc: JobsError | None) -> str:
    """What a presence not taken out (`exc`: why; None: given up at a deadline) leaves."""
    why = " within the second stop's deadline" if exc is None else f" ({exc})"
    return (
        f"could not deregister{why}: it counts as a live worker until its last beat is "
        f"{LIVE_WORKER_WINDOW_MS // 1000} s old"
    )
