"""Rate limits as operators see them (engine/rate_limits.py): what `queue_stats`, `diagnose_queue`
and `mcp-jobs limits` show.

A limit is declared in code (a job's `rate_limit=`, a worker's `Limits`), so what the database
knows is the rate that last took under each key, its TAT and the starts reserved under it: that
is what is shown, beside the job rates published descriptors declare. A key's next start is the
earliest reserved slot (a shed job starts there), else when its TAT next allows one; the TAT,
which every reservation moved on, is shown apart as `reserved_until`. Under a tenant pin, other
tenants' keys and keys computed from input (app data, e.g. a customer id) are left out.

`diagnose_queue` judges each queue's ready jobs by its own limits, its jobs' and the tenants'
(`rates_in_play`): work a limit holds back is RATE_LIMITED, not an old backlog for more workers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from pydantic import Field

from engine.drivers.base import RATES, require
from engine.instants import iso
from engine.rate_limits import RateLimit, RateReservation, RateState
from mcp_jobs.operations.models import Envelope, Finding, QueueStatsView, RateLimitView
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.together import each, together
from schemas.descriptor import JobDescriptor
from schemas.jobs import JobRecord

# Stored keys of one kind read at most per answer: computed keys (one per customer) can be many.
# Reservations too, earliest first: a key whose first reservation lies past them shows its TAT.
MAX_KEYS = 1000


class RateLimitsResult(Envelope):
    rate_limits: list[RateLimitView] | None = Field(
        default=None,
        description="every rate limit known, by key: declared on a job, or stored (with its next"
        " start while it holds starts back)",
    )
    at: int | None = None


async def list_rate_limits(scope: Scope) -> RateLimitsResult:
    return RateLimitsResult(
        ok=True, rate_limits=await rate_limit_views(scope), at=scope.jobs.clock.now_ms()
    )


def _rate_text(limit: int, per_ms: int, burst: int) -> str:
    return RateLimit(limit, per=per_ms / 1000, burst=burst).describe()


def _visible(key: str, tenant: str | None, names: set[str]) -> bool:
    if tenant is None:
        return True
    kind, _, rest = key.partition(":")
    if kind == "tenant":
        return rest == tenant
    return kind == "queue" or rest in names  # a job's own key, never a computed one


def job_of(key: str, names: set[str]) -> str | None:
    """The job a `job:` key limits (`job:<name>` or `job:<name>:<computed>`), if declared."""
    if not key.startswith("job:"):
        return None
    candidate = key[4:]
    while candidate:
        if candidate in names:
            return candidate
        candidate = candidate.rpartition(":")[0]
    return None


async def _stored(scope: Scope, tenant: str | None) -> list[RateState]:
    """The stored keys, a kind at a time: computed `job:` keys (one per customer) can be many,
    and must not crowd the queues' and tenants' keys out of the answer."""
    store = require(scope.jobs.driver, RATES)
    kinds = ("job:", "queue:", "tenant:" if tenant is None else f"tenant:{tenant}")
    found = await each(store.rate_states(MAX_KEYS, kind) for kind in kinds)
    return [state for states in found for state in states]


def first_slots(reservations: Sequence[RateReservation], now: int) -> dict[str, int]:
    """Each key's earliest reserved start (epoch ms) among `reservations` (by slot, as
    `rate_reservations` reads them), past ones left out: void, their slots lost."""
    slots: dict[str, int] = {}
    for r in reservations:
        if r.late_at < now:
            continue
        # Rows stored before `keys` was name only the key that set the slot.
        for key in r.keys.split("\n") if r.keys else (r.blocked_key,):
            slots.setdefault(key, r.slot_at)
    return slots


def _later(at: int | None, now: int) -> int | None:
    return at if at is not None and at > now else None


async def rate_limit_views(
    scope: Scope, descriptors: Sequence[JobDescriptor] | None = None
) -> list[RateLimitView]:
    """Every rate limit known: declared on a job, or stored (with its next start while it holds
    starts back). Sorted by key."""
    tenant = scope.tenant(None)
    now = scope.jobs.clock.now_ms()
    described = await scope.jobs.describe() if descriptors is None else descriptors
    names = {d.name for d in described}
    views: dict[str, RateLimitView] = {}
    for d in described:
        if d.rate_limit is not None:
            r = d.rate_limit
            views[f"job:{d.name}"] = RateLimitView(
                key=f"job:{d.name}",
                rate=_rate_text(r.limit, r.per_ms, r.burst) + (", per key" if r.keyed else ""),
                limit=r.limit,
                per_ms=r.per_ms,
                burst=r.burst,
            )
    if RATES.offered_by(scope.jobs.driver):
        store = require(scope.jobs.driver, RATES)
        stored, reserved = await together(_stored(scope, tenant), store.rate_reservations(MAX_KEYS))
        slots = first_slots(reserved, now)
        for state in stored:
            if not _visible(state.key, tenant, names):
                continue
            unreserved = state.next_start_at(now)  # after every start reserved under the key
            first = slots.get(state.key)
            views[state.key] = RateLimitView(
                key=state.key,
                rate=_rate_text(state.limit, state.per_ms, state.burst),
                limit=state.limit,
                per_ms=state.per_ms,
                burst=state.burst,
                next_start_at=_later(unreserved if first is None else min(first, unreserved), now),
                reserved_until=None if first is None else _later(unreserved, now),
            )
    return [views[k] for k in sorted(views)]


class RatesByQueue(NamedTuple):
    """The rate limits `queue_stats` shows: each queue's (its own and its jobs'), the tenants'."""

    per_queue: dict[str, list[RateLimitView]]
    tenants: list[RateLimitView]

    def attach(self, shown: list[QueueStatsView]) -> list[QueueStatsView]:
        """`shown` with each queue's rate limits."""
        return [
            s.model_copy(update={"rate_limits": self.per_queue[s.queue]})
            if s.queue in self.per_queue
            else s
            for s in shown
        ]


async def rates_by_queue(scope: Scope) -> RatesByQueue:
    """Every rate limit known, sorted to the queue it holds back or to the tenants."""
    described = await scope.jobs.describe()
    views = await rate_limit_views(scope, described)
    queue_of = {d.name: d.queue for d in described}
    names = set(queue_of)
    per_queue: dict[str, list[RateLimitView]] = {}
    tenants: list[RateLimitView] = []
    for view in views:
        kind, _, rest = view.key.partition(":")
        if kind == "tenant":
            tenants.append(view)
            continue
        name = job_of(view.key, names)
        queue = rest if kind == "queue" else (queue_of[name] if name else None)
        if queue is not None:
            per_queue.setdefault(queue, []).append(view)
    return RatesByQueue(per_queue, tenants)


# Ready jobs of a queue read (its newest, as diagnose_queue's page) to find whose limits hold them.
READY_SCAN = 200


async def _ready(scope: Scope, queue: str, tenant: str | None) -> list[JobRecord]:
    page = await scope.jobs.list(state="ready", queue=queue, tenant_id=tenant, limit=READY_SCAN)
    return page.jobs


async def rates_in_play(
    scope: Scope, stats: Sequence[QueueStatsView], tenants: Sequence[RateLimitView]
) -> list[QueueStatsView]:
    """`stats` with each queue's rate limits as `diagnose_queue` judges its ready jobs by:
    beside the queue's own and its jobs', the tenants' holding its ready jobs back now (a
    tenant's limit spans queues, so `queue_stats` lists it apart) and, under a tenant pin, a
    job's keyed limit holding the tenant's own jobs back (see `_keyed_holds`)."""
    tenant = scope.tenant(None)
    held = {v.key.partition(":")[2]: v for v in tenants if _held_until(v) is not None}
    waiting = [s for s in stats if s.ready]
    extra: dict[str, list[RateLimitView]] = {}
    if tenant is not None:  # every ready job a pinned answer counts is the tenant's own
        extra = await _keyed_holds(scope, waiting, tenant)
        if tenant in held:
            for s in waiting:
                extra.setdefault(s.queue, []).append(held[tenant])
    elif held:
        pages = await each(_ready(scope, s.queue, None) for s in waiting)
        for s, page in zip(waiting, pages, strict=True):
            seen = {j.tenant_id for j in page if j.tenant_id is not None and j.tenant_id in held}
            extra[s.queue] = [held[t] for t in sorted(seen)]
    return [_joined(s, extra[s.queue]) if extra.get(s.queue) else s for s in stats]


def _joined(stats: QueueStatsView, views: list[RateLimitView]) -> QueueStatsView:
    """`stats` with `views` in place of its limits under the same keys, the others added."""
    keys = {v.key for v in views}
    kept = [v for v in stats.rate_limits or () if v.key not in keys]
    return stats.model_copy(update={"rate_limits": [*kept, *views]})


async def _keyed_holds(
    scope: Scope, waiting: Sequence[QueueStatsView], tenant: str
) -> dict[str, list[RateLimitView]]:
    """Under a tenant pin, each queue's job limits whose computed keys hold the tenant's own
    ready jobs back, as the job's declared limit with those jobs' reserved turns: the computed
    keys are app data and may be another tenant's, so they are never shown, but a shed job's
    reservation (its own, by id) says which key holds it and until when."""
    jobs_rated = [s for s in waiting if any(v.key.startswith("job:") for v in s.rate_limits or ())]
    if not jobs_rated or not RATES.offered_by(scope.jobs.driver):
        return {}
    now = scope.jobs.clock.now_ms()
    pages, reserved = await together(
        each(_ready(scope, s.queue, tenant) for s in jobs_rated),
        require(scope.jobs.driver, RATES).rate_reservations(MAX_KEYS),
    )
    ahead = {r.job_id: r for r in reserved if r.slot_at > now}  # not yet due: held back
    out: dict[str, list[RateLimitView]] = {}
    for s, page in zip(jobs_rated, pages, strict=True):
        declared = {v.key: v for v in s.rate_limits or ()}
        slots: dict[str, list[int]] = {}
        for j in page:
            r = ahead.get(j.id)
            if r is not None and r.blocked_key.startswith(f"job:{j.name}:"):
                slots.setdefault(f"job:{j.name}", []).append(r.slot_at)
        out[s.queue] = [
            declared[k].model_copy(update={"next_start_at": min(at), "reserved_until": max(at)})
            for k, at in sorted(slots.items())
            if k in declared
        ]
    return out


def rate_findings(scope: Scope, stats: Sequence[QueueStatsView], workers: int) -> list[Finding]:
    """RATE_LIMITED for `diagnose_queue`: ready work waits because a rate limit holds its starts
    back, not for lack of workers (info: the limit works as declared; more workers would not
    start it sooner). Names the key, the rate and the next start; `stats` as `rates_in_play`
    gives them, so a tenant's limit is named in each queue where it holds work back."""
    now = scope.jobs.clock.now_ms()
    out: list[Finding] = []
    for s in stats:
        # A flooded limit holds work back with its next turn due now: its turns reserved ahead
        # (`reserved_until`) are what the backlog waits for.
        holding = [v for v in s.rate_limits or () if _held_until(v) is not None]
        if not (s.ready and workers and holding):
            continue
        last = max(holding, key=lambda v: _held_until(v) or 0)
        others = [f"{v.key} ({v.rate})" for v in holding if v is not last]
        also = ""
        if others:  # several tenants' limits, say, each holding back its own jobs
            listed = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if others[3:] else "")
            also = f"; rate limit(s) {listed} hold some of them back too"
        if last.next_start_at is not None:
            at = last.next_start_at
            until = f"the next start may happen at {iso(at)} (in {max(0, at - now) // 1000} s)"
        else:
            at = last.reserved_until or now
            until = (
                f"its turns are reserved until {iso(at)} (in {max(0, at - now) // 1000} s), "
                "each shed job starting at its own"
            )
        out.append(
            Finding(
                code="RATE_LIMITED",
                severity="info",
                queue=s.queue,
                cause=f"{s.ready} ready job(s) in queue {s.queue} (the oldest waiting "
                f"{s.oldest_ready_ms // 1000} s) wait for rate limit {last.key} ({last.rate}), "
                f"not for workers: {until}{also}; more workers would not start them sooner",
                fix=scope.fixes.command("limits", "--json"),
            )
        )
    return out


def holds(stats: QueueStatsView, job: JobRecord) -> bool:
    """Whether a rate limit holding starts back in `job`'s queue now holds `job` back: its key
    names the job (`job:<name>`, `job:<name>:<key>`), its queue or its tenant."""
    for view in stats.rate_limits or ():
        if _held_until(view) is None:
            continue
        key = view.key
        if key == f"job:{job.name}" or key.startswith(f"job:{job.name}:"):
            return True
        if key == f"queue:{job.queue}" or (job.tenant_id and key == f"tenant:{job.tenant_id}"):
            return True
    return False


def _held_until(view: RateLimitView) -> int | None:
    """Until when a limit holds starts back (its next start, else its reserved turns' end);
    None when it holds nothing now."""
    return view.next_start_at if view.next_start_at is not None else view.reserved_until
