"""The pruning pass: settled jobs past their retention are deleted, in small batches, by one
worker at a time; with them go expired descriptors and inbound events, rate-limit keys no
start took for a day, outbox rows published a week ago, events of no job past the audit
retention (90 days unless set), and the delete markers a store keeps (NATS KV) an hour after
their delete.

Every worker runs a `Pruner` (unless `Worker(prune=False)` or `MCP_JOBS_PRUNE=off`); a named
leadership lease (`lead("prune", ...)`, as the scheduler's) lets only one of them prune at a
time. A pass computes its cutoffs once (`engine.retention.plan`), then deletes at most
`batch_size` rows per transaction, renewing the lease and pausing on the injected clock between
batches (`batch_pause_ms`: `pause_ms`, and on SQLite at least as long as the batch took, so a
drain on the same server keeps its pace; benchmarks/README.md has the measurement), until a
batch comes back short. Each pass logs one line and tells its
listeners (the worker's metrics count `mcp_jobs_pruned_jobs_total{state}`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

import anyio

from engine import bounds
from engine.descriptors import DESCRIPTOR_EXPIRY_MS, DescriptorInvalidError, vouch_for
from engine.drivers.base import (
    DESCRIPTORS,
    EVENTS,
    HISTORY,
    LEADER_LEASES,
    OUTBOX,
    RATES,
    TOMBSTONES,
    require,
)
from engine.errors import JobsError
from engine.ids import worker_id
from engine.outbox import PUBLISHED_KEEP_MS
from engine.rate_limits import idle_before_us
from engine.retention import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_POLICY,
    Cutoffs,
    Policy,
    PruneCount,
    Retention,
    audit_cutoff,
    interval_from_env,
    plan,
    policy_from_env,
    totals,
)
from engine.services import ServiceLoop, attempt

if TYPE_CHECKING:
    from engine.client import Jobs
    from engine.declare import JobRegistry
    from schemas.descriptor import JobDescriptor, RetentionInfo

logger = logging.getLogger("mcp_jobs.pruner")

LEASE_NAME = "prune"
DEFAULT_LEASE_MS = 60_000
MAX_BATCH_SIZE = 10_000
# The background pass's pause between two batches: the drain's claims and settles get the
# database between deletes. Chosen by benchmarks/prune_during_drain.py.
DEFAULT_PAUSE_MS = 25
MAX_PAUSE_MS = 60_000
# Drivers whose every write takes the store's one write lock (SQLite): a batch there holds off
# every claim and settle while it runs, so a fixed pause after a long batch left a drain beside
# it a few percent of the lock. Row-locking stores (PostgreSQL) keep the fixed pause.
ONE_WRITER_KINDS = frozenset({"sqlite"})
# A delete marker outlives its key by this long: a writer that read the key before the delete
# (an enqueue rolling a dedupe intent forward) has long finished, so none relies on it after.
TOMBSTONE_KEEP_MS = 3_600_000
# What a pass applies while a published retention cannot be read: every row kept.
KEEP_ALL = Policy(done=None, failed=None, dead=None, cancelled=None, audit=None)


@dataclass(frozen=True)
class PrunePass:
    """What one pass did: whether this pruner led, the cutoffs it used, what it deleted."""

    at: int
    leader: bool
    cutoffs: Cutoffs | None = None
    pruned: list[PruneCount] = field(default_factory=list[PruneCount])
    batches: int = 0

    def by_state(self) -> dict[str, int]:
        return totals(self.pruned)


PassListener = Callable[[PrunePass], None]


def worker_policy(
    retention: Retention | None,
    environ: Mapping[str, str] | None = None,
    fields: Collection[str] | None = None,
) -> Policy:
    """A worker's default policy: the defaults, under what the code declares (`retention`),
    under the environment (`MCP_JOBS_RETAIN_<STATE>` and `MCP_JOBS_RETAIN_AUDIT`, each where
    set; only `fields`' settings are read when given: `retention.policy_from_env`)."""
    declared = DEFAULT_POLICY if retention is None else retention.over(DEFAULT_POLICY)
    return policy_from_env(declared, environ, fields)


def job_policies(registry: JobRegistry, default: Policy) -> dict[str, Policy]:
    """The policy of each registered job that declares `retention=`, over `default`."""
    return {d.name: d.retention.over(default) for d in registry if d.retention is not None}


def declared_retention(registry: JobRegistry, policy: Policy) -> Callable[[str], RetentionInfo]:
    """What a worker publishes as job `name`'s retention: its own `retention=` over `policy`."""
    own = job_policies(registry, policy)
    return lambda name: own.get(name, policy).info()


def in_force(
    policy: Policy, per_name: Mapping[str, Policy], published: Iterable[JobDescriptor]
) -> tuple[Policy, dict[str, Policy]]:
    """What a prune here applies: this process's `policy` (and `per_name`, its jobs' own) with,
    for each job a worker published a retention for, the longer of the two field by field, and
    the longest audit retention of all. So no prune deletes a row that the policy of the worker
    running its job keeps, whatever this process declares or does not know."""
    audit = policy.audit
    names = dict(per_name)
    for descriptor in published:
        if descriptor.retention is None:
            continue
        theirs = Policy.of(descriptor.retention)
        names[descriptor.name] = names.get(descriptor.name, policy).longest(theirs)
        audit = None if audit is None or theirs.audit is None else max(audit, theirs.audit)
    # The audit retention is the whole store's, not a job's: every policy carries the one.
    return policy._replace(audit=audit), {n: p._replace(audit=audit) for n, p in names.items()}


def merge(counts: Sequence[PruneCount], more: Sequence[PruneCount]) -> list[PruneCount]:
    """Two lists of counts as one, per state and queue."""
    summed: dict[tuple[str, str], PruneCount] = {}
    for c in (*counts, *more):
        key = (c.state, c.queue)
        prior = summed.get(key)
        summed[key] = c if prior is None else c._replace(rows=prior.rows + c.rows)
    return [summed[k] for k in sorted(summed)]


async def prune_all(
    jobs: Jobs,
    cutoffs: Cutoffs,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    tenant_id: str | None = None,
    max_batches: int | None = None,
    pause_ms: int = 0,
) -> tuple[list[PruneCount], int, bool]:
    """Prune in batches of `batch_size` until a batch comes back short (or `max_batches` ran),
    pausing `batch_pause_ms` on the jobs' clock after each full batch (0: only yield to the
    event loop).
    Returns the counts, the batches run, and whether expired rows may remain."""
    bounds.whole("batch_size", batch_size, 1, MAX_BATCH_SIZE)
    bounds.whole("pause_ms", pause_ms, 0, MAX_PAUSE_MS, unit="ms")
    history = require(jobs.driver, HISTORY)
    pruned: list[PruneCount] = []
    batches = 0
    clock = jobs.clock
    while max_batches is None or batches < max_batches:
        started = clock.now_ms()
        got = await history.prune(cutoffs, batch_size, tenant_id)
        took = clock.now_ms() - started
        batches += 1
        pruned = merge(pruned, got)
        if sum(c.rows for c in got) < batch_size:
            return pruned, batches, False
        # Also after the last of `max_batches`: a caller going batch by batch (`db prune`)
        # calls again at once, and the drain's writes must get the lock between.
        await between_batches(jobs, took, pause_ms)
    return pruned, batches, True


def batch_pause_ms(kind: str, took_ms: int, pause_ms: int) -> int:
    """THE pause after a batch that took `took_ms` on a `kind` driver: `pause_ms`, and where
    one write lock serves the whole store (`ONE_WRITER_KINDS`) at least `took_ms` (so the
    prune holds the lock at most half the time), within `MAX_PAUSE_MS`."""
    if kind not in ONE_WRITER_KINDS:
        return pause_ms
    return min(max(pause_ms, took_ms), MAX_PAUSE_MS)


async def between_batches(jobs: Jobs, took_ms: int, pause_ms: int = 0) -> None:
    """Let the drain's claims and settles run before the next delete of a prune by hand (its
    job rows, `prune_history`'s audit events): `batch_pause_ms` after a batch that took
    `took_ms`, on the jobs' clock, or (0) one pass of the event loop."""
    pause = batch_pause_ms(jobs.driver.kind, took_ms, pause_ms)
    if pause > 0:
        await jobs.clock.sleep_ms(pause)
    else:
        await anyio.lowlevel.checkpoint()


class Pruner(ServiceLoop):
    """Prunes settled history every `interval_ms` while it holds the prune lease. `Worker`
    runs one in-process when retention is on."""

    def __init__(
        self,
        jobs: Jobs,
        *,
        retention: Retention | None = None,
        interval_ms: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        lease_ms: int = DEFAULT_LEASE_MS,
        pause_ms: int = DEFAULT_PAUSE_MS,
        holder: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        every = interval_from_env(environ) if interval_ms is None else interval_ms
        bounds.whole("interval_ms", every, 1, bounds.MAX_DELAY_MS, unit="ms")
        bounds.whole("lease_ms", lease_ms, 1, bounds.MAX_DELAY_MS, unit="ms")
        bounds.whole("batch_size", batch_size, 1, MAX_BATCH_SIZE)
        bounds.whole("pause_ms", pause_ms, 0, MAX_PAUSE_MS, unit="ms")
        self.jobs = jobs
        self.history = require(jobs.driver, HISTORY)
        self.leases = require(jobs.driver, LEADER_LEASES)
        # Published job descriptors nobody republished for DESCRIPTOR_EXPIRY_MS go with a pass.
        self.descriptors = (
            require(jobs.driver, DESCRIPTORS) if DESCRIPTORS.offered_by(jobs.driver) else None
        )
        self.clock = jobs.clock
        self.policy = worker_policy(retention, environ)
        self.interval_ms = every
        self.batch_size = batch_size
        self.lease_ms = lease_ms
        self.pause_ms = pause_ms
        self.holder = holder or f"pruner:{worker_id()}"
        self.leading = False
        self._listeners: list[PassListener] = []
        super().__init__()

    def add_listener(self, listener: PassListener) -> None:
        self._listeners.append(listener)

    async def policies(self) -> tuple[Policy, dict[str, Policy]]:
        """This pass's policies: this worker's, under what other workers published (in_force)."""
        own = job_policies(self.jobs.registry, self.policy)
        try:
            published = (
                [] if self.descriptors is None else await self.descriptors.published_descriptors()
            )
        except DescriptorInvalidError as exc:
            # A job's published retention is unknown, so this pass deletes no history (none
            # its worker's policy keeps); it forgets that row, and the next pass reads the rest.
            logger.warning("prune pass keeps all history: %s", exc)
            return KEEP_ALL, {}
        return in_force(self.policy, own, published)

    async def pass_once(self) -> PrunePass:
        """Take or renew the lease; while leading, prune everything expired now, batch by
        batch, pausing (`batch_pause_ms`) and renewing the lease between batches, stopping if it was
        lost or the pruner is stopping."""
        now = self.clock.now_ms()
        self.leading = await self.leases.lead(LEASE_NAME, self.holder, self.lease_ms)
        if not self.leading:
            return PrunePass(at=now, leader=False)
        policy, per_name = await self.policies()
        cutoffs = plan(policy, now, per_name=per_name)
        pruned: list[PruneCount] = []
        batches = 0
        while not self._stopping:
            started = self.clock.now_ms()
            got = await self.history.prune(cutoffs, self.batch_size, None)
            batches += 1
            pruned = merge(pruned, got)
            if sum(c.rows for c in got) < self.batch_size:
                break
            await self._pause(self.clock.now_ms() - started)
            if self._stopping:
                break
            self.leading = await self.leases.lead(LEASE_NAME, self.holder, self.lease_ms)
            if not self.leading:
                break
        if self.descriptors is not None and not self._stopping:
            vouch_for(self.jobs.registry)
            await self.descriptors.forget_descriptors(now - DESCRIPTOR_EXPIRY_MS)
        if EVENTS.offered_by(self.jobs.driver) and not self._stopping:
            # Inbound events past their window (engine/inbound_events.py) go with each pass.
            await require(self.jobs.driver, EVENTS).prune_events(now)
        if RATES.offered_by(self.jobs.driver):
            # Rate-limit keys no start took for a day (engine/rate_limits.py).
            rates = require(self.jobs.driver, RATES)
            await self._in_batches(partial(rates.forget_idle_rates, idle_before_us(now)))
        outbox = require(self.jobs.driver, OUTBOX)
        await self._in_batches(partial(outbox.outbox_forget_published, now - PUBLISHED_KEEP_MS))
        audit_before = audit_cutoff(policy, now)
        if audit_before is not None:
            # Events of no job (the audit of refused and bulk calls) have no job to go with.
            forget = partial(self.history.forget_jobless_events, audit_before)
            await self._in_batches(forget)
        if TOMBSTONES.offered_by(self.jobs.driver):
            # The markers of keys deleted an hour ago (NATS KV), this pass's deletes included.
            tombstones = require(self.jobs.driver, TOMBSTONES)
            await self._in_batches(partial(tombstones.forget_tombstones, now - TOMBSTONE_KEEP_MS))
        report = PrunePass(at=now, leader=True, cutoffs=cutoffs, pruned=pruned, batches=batches)
        self._report(report)
        return report

    async def _in_batches(self, forget: Callable[[int], Awaitable[int]]) -> None:
        """`forget(batch_size)` until a batch comes back short, pausing between batches."""
        while not self._stopping:
            started = self.clock.now_ms()
            if await forget(self.batch_size) < self.batch_size:
                return
            await self._pause(self.clock.now_ms() - started)

    def _report(self, report: PrunePass) -> None:
        counts = report.by_state()
        if any(counts.values()):
            logger.info(
                "pruned %d settled job(s) in %d batch(es): %s",
                sum(counts.values()),
                report.batches,
                ", ".join(f"{state} {n}" for state, n in counts.items()),
                extra={"prune": {"pruned": counts, "batches": report.batches}},
            )
        else:
            logger.debug("prune pass: nothing expired", extra={"prune": {"pruned": counts}})
        for listener in self._listeners:
            try:
                listener(report)
            except Exception:
                logger.exception("prune listener failed")

    # --- the loop -------------------------------------------------------------------------------

    async def _turn(self) -> None:
        """A pass now, then one every `interval_ms` (a follower checks the lease as often)."""
        await attempt("prune pass", logger, self.pass_once)
        await self._sleep(self.interval_ms)

    async def _pause(self, took_ms: int) -> None:
        """The pause after a batch that took `took_ms` (`batch_pause_ms`); `stop()` ends it."""
        await self._sleep(batch_pause_ms(self.jobs.driver.kind, took_ms, self.pause_ms))

    async def _release(self) -> None:
        """Hand the lease back on the way out so a peer prunes at its next pass."""
        if not self.leading:
            return
        self.leading = False
        try:
            await self.leases.lead(LEASE_NAME, self.holder, 0)
        except JobsError as exc:
            logger.warning("prune lease not released (a peer takes over on expiry): %s", exc)
