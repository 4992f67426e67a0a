"""Ready work a concurrency cap holds back (engine.limits): a job's own cap (`@job(concurrency=)`,
from its descriptor) and a worker's `Limits` (per queue, per tenant, in all), which the live
workers publish with their presence (`WorkerInfo.caps`). A backlog every one of whose jobs waits
for a full cap is not short of workers: more of them would start none of it, so diagnose_queue's
BACKLOG_OLD names the caps instead of handing out a worker line that changes nothing."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from engine.limits import EVERY_TENANT, GLOBAL_CAP
from mcp_jobs.operations.models import QueueStatsView
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.workers import serves
from schemas.jobs import JobRecord
from schemas.stats import WorkerInfo

# Tenants of the sampled ready jobs whose running count is read (one stats read each), most
# frequent first: a backlog spread over more tenants is not held by tenant caps alone.
TENANTS_READ = 10
# What sets each kind of cap, as a reader of the finding would look for it.
_SET_BY = {
    "job": "@job(concurrency=)",
    "queue": "Limits.per_queue",
    "tenant": "Limits.per_tenant",
    "global": "Limits.global_cap",
}


class FullCap(NamedTuple):
    """A cap whose slots are all taken: its key as engine.limits names it, and the counts."""

    key: str
    running: int
    cap: int
    # What set it, where the key's kind does not say (a tenant's own cap: tenant_overrides).
    set_by: str | None = None

    def said(self) -> str:
        kind, _, name = self.key.partition(":")
        who = {"job": "job", "queue": "queue", "tenant": "tenant"}.get(kind)
        what = f"{who} {name}" if who else "all queues"
        return f"{what} ({self.running} running of {self.cap}, {self.set_by or _SET_BY[kind]})"


class CapHold(NamedTuple):
    """The full caps that hold back ready jobs of a queue, and how many of the `sampled` ready
    jobs wait for one of them; `kept`: the caps a worker started to join the ones serving it
    must keep (`strictest_caps`)."""

    caps: list[FullCap]
    held: int
    sampled: int
    kept: dict[str, int]

    @property
    def whole(self) -> bool:
        """Every sampled ready job waits for a full cap: more workers would start none."""
        return bool(self.caps) and self.held == self.sampled

    @property
    def jobs_only(self) -> bool:
        """Only jobs' own caps are full: raising one is the fix."""
        return all(c.key.startswith("job:") for c in self.caps)


def serving(workers: list[WorkerInfo], queue: str) -> list[WorkerInfo]:
    return [w for w in workers if serves(w, queue)]


def strictest_caps(workers: list[WorkerInfo]) -> dict[str, int]:
    """Every cap any of `workers` keeps, each at the smallest value kept: a worker started
    with them starts no job that one of theirs would refuse."""
    caps: dict[str, int] = {}
    for worker in workers:
        for key, cap in (worker.caps or {}).items():
            caps[key] = min(cap, caps.get(key, cap))
    return dict(sorted(caps.items()))


def _kept(workers: list[WorkerInfo], key: str, otherwise: str | None = None) -> int | None:
    """The cap on `key` the serving workers keep: the largest, since each checks its own value
    against the shared slots; None when one of them keeps none (it could start the job)."""
    kept = []
    for worker in workers:
        caps = worker.caps or {}
        cap = caps.get(key, caps.get(otherwise) if otherwise else None)
        if cap is None:
            return None
        kept.append(cap)
    return max(kept) if kept else None


async def _running_in_all(scope: Scope, tenant: str | None) -> int:
    return sum(s.running - s.expired_leases for s in await scope.jobs.stats(None, tenant_id=tenant))


async def cap_hold(
    scope: Scope,
    stats: QueueStatsView,
    workers: list[WorkerInfo],
    ready: list[JobRecord],
    running: list[JobRecord],
) -> CapHold:
    """Which caps hold back `ready` (a page of the queue's ready jobs), given `running` (a page of
    its running ones) and the live `workers`. Under a tenant pin the counts are that tenant's:
    a queue's or the global cap may then read as not full (the other tenants' jobs unseen)."""
    queue = stats.queue
    full: dict[str, FullCap] = {}
    declared = {d.name: d.concurrency for d in await scope.jobs.describe() if d.queue == queue}
    by_name = Counter(r.name for r in running)
    for name in {r.name for r in ready}:
        cap = declared.get(name)
        if cap and by_name[name] >= cap:
            full[f"job:{name}"] = FullCap(f"job:{name}", by_name[name], cap)
    peers = serving(workers, queue)
    if any(w.caps for w in peers):
        in_queue = stats.running - stats.expired_leases
        cap = _kept(peers, f"queue:{queue}")
        if cap is not None and in_queue >= cap:
            full[f"queue:{queue}"] = FullCap(f"queue:{queue}", in_queue, cap)
        cap = _kept(peers, GLOBAL_CAP)
        if cap is not None and (in_all := await _running_in_all(scope, scope.tenant(None))) >= cap:
            full[GLOBAL_CAP] = FullCap(GLOBAL_CAP, in_all, cap)
        tenants = Counter(r.tenant_id for r in ready if r.tenant_id is not None)
        for tenant, _ in tenants.most_common(TENANTS_READ):
            key = f"tenant:{tenant}"
            cap = _kept(peers, key, EVERY_TENANT)
            if cap is not None and (of_tenant := await _running_in_all(scope, tenant)) >= cap:
                own = all(key in (w.caps or {}) for w in peers)
                set_by = "Limits.tenant_overrides" if own else None
                full[key] = FullCap(key, of_tenant, cap, set_by)
    whole = f"queue:{queue}" in full or GLOBAL_CAP in full
    held = sum(
        1 for r in ready if whole or f"job:{r.name}" in full or f"tenant:{r.tenant_id}" in full
    )
    return CapHold(sorted(full.values()), held, len(ready), strictest_caps(peers))
