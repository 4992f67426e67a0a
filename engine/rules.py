"""The job rules every driver applies, as pure functions: no I/O, no clock, no driver.

A driver calls these (memory, SQLite) or encodes them in SQL pinned by a test that the SQL and
the function agree on every case (PostgreSQL, and SQLite's claim and stats statements). A rule
changes here, and only here.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from pydantic import BaseModel

from schemas.jobs import ClaimExclusion, EnqueueRequest, JobRecord, NackOptions
from schemas.states import LIVE_STATES, RETRYABLE_STATES, RUN_NOW_STATES, JobState
from schemas.stats import RECENT_SETTLED_CAP, RECENT_SETTLED_MS, QueueStats

__all__ = [
    "LIVE_STATES",
    "PRIORITY_DEFAULT",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "PRIORITY_STEP_MS",
    "RECENT_SETTLED_CAP",
    "RECENT_SETTLED_MS",
    "RECENT_SETTLED_STATES",
    "RETRYABLE_STATES",
    "SETTLING_STATES",
    "WAITING_STATES",
    "CountedApart",
    "DedupeKey",
    "LiveGroup",
    "NackOutcome",
    "Settled",
    "ack_transition",
    "apply_nack",
    "can_cancel",
    "can_retry",
    "cancel_event_data",
    "cancel_transition",
    "claim_rank",
    "claim_transition",
    "counts_ready",
    "dedupe_key",
    "event_kind_for",
    "is_claimable",
    "is_shed",
    "live_groups",
    "nack_attempt",
    "nack_event_data",
    "nack_state",
    "nack_transition",
    "new_record",
    "queue_stats",
    "recent_settled_counts",
    "recent_settled_edge",
    "recent_settled_since",
    "recent_settled_start",
    "retry_event_data",
    "retry_transition",
    "settled_window_ms",
    "stats_bucket",
    "stats_filter",
]

# Rows a claim takes once due; a running row is claimable only when its lease ran out (rule 13).
WAITING_STATES: tuple[JobState, ...] = ("ready", "delayed", "suspended")
# What a nack may settle a job into for good: an exhausted retry, or a permanent failure.
SETTLING_STATES: tuple[JobState, ...] = ("dead", "failed")

DedupeKey = tuple[str, str, str]


def dedupe_key(name: str, tenant_id: str | None, key: str) -> DedupeKey:
    """The dedupe namespace (rule 2): a null tenant folds to '' as the SQL index's coalesce."""
    return (name, tenant_id or "", key)


def new_record(request: EnqueueRequest, now: int) -> JobRecord:
    """The row an enqueue inserts: due now is ready, later delayed; waiting since it could first
    be claimed, `queued_at` = max(run_at, now) (a past run_at keeps its place in the claim order,
    but a job made now has not waited since then: the oldest-ready age counts from its making)."""
    return JobRecord(
        id=request.id,
        run_id=request.run_id,
        name=request.name,
        queue=request.queue,
        tenant_id=request.tenant_id,
        idempotency_key=request.idempotency_key,
        input=request.input,
        state=request.initial_state(now),
        attempt=0,
        max_attempts=request.max_attempts,
        run_at=request.run_at,
        queued_at=max(request.run_at, now),
        created_at=now,
        updated_at=now,
        timeout_ms=request.timeout_ms,
        traceparent=request.traceparent,
        enqueued_by=request.enqueued_by,
        priority=request.priority,
    )


# --- claim --------------------------------------------------------------------------------------


def is_claimable(job: JobRecord, now: int) -> bool:
    """A waiting row whose time has come, or a running one whose lease ran out (rule 13)."""
    if job.state in WAITING_STATES:
        return job.run_at <= now
    if job.state == "running":
        return job.lease_expires_at is not None and job.lease_expires_at <= now
    return False


def is_excluded(job: JobRecord, excluding: ClaimExclusion | None) -> bool:
    """Whether a claim leaves `job` alone for a cap its worker found full: its queue, its name or
    its tenant (a job with no tenant is under no tenant's cap)."""
    if excluding is None:
        return False
    return (
        job.queue in excluding.queues
        or job.name in excluding.names
        or (job.tenant_id is not None and job.tenant_id in excluding.tenants)
    )


# Priority: a small integer, higher first. One point is worth PRIORITY_STEP_MS of waiting: a
# claim takes rows in (run_at - priority * step, id) order, so a job ready at t is claimed before
# every job of priority q made ready after t + (q - its priority) * step. Higher priority goes
# first through any backlog shorter than that, FIFO within a priority, and nothing starves.
# Never below 0: then a due row's rank is at most now, which bounds the claim's index walk.
PRIORITY_MIN = 0
PRIORITY_MAX = 10
PRIORITY_DEFAULT = 0
PRIORITY_STEP_MS = 300_000


def claim_rank(job: JobRecord) -> tuple[int, str]:
    """The order claims take claimable rows in (both SQL drivers index this expression)."""
    return (job.run_at - job.priority * PRIORITY_STEP_MS, job.id)


def claim_transition(job: JobRecord, worker_id: str, now: int, lease_ms: int) -> JobRecord:
    """The row once claimed: running under a new lease, one attempt more, no cancel pending."""
    return job.model_copy(
        update={
            "state": "running",
            "attempt": job.attempt + 1,
            "worker_id": worker_id,
            "lease_expires_at": now + lease_ms,
            "cancel_requested": False,
            "updated_at": now,
        }
    )


# --- ack ----------------------------------------------------------------------------------------


def ack_transition(job: JobRecord, now: int, output: Any) -> JobRecord:
    """The row once acked: done, the output kept unless none was given, the last error cleared
    (it stays in the events)."""
    update: dict[str, Any] = {
        "state": "done",
        "updated_at": now,
        "finished_at": now,
        "worker_id": None,
        "lease_expires_at": None,
        "last_error": None,
    }
    if output is not None:
        update["output"] = output
    return job.model_copy(update=update)


# --- nack ---------------------------------------------------------------------------------------


def is_shed(options: NackOptions) -> bool:
    """A job handed back over a cap: no attempt burned, not parked, not settled (rule 7). It
    stays `ready` and keeps its `queued_at`, so it still counts in depth and oldest-ready age."""
    return (
        not options.park
        and not options.counts_as_attempt
        and not options.dead_letter
        and not options.fail
    )


def nack_state(options: NackOptions) -> JobState:
    """Where a nacked job goes (rule 7): dead or failed when settled for good, suspended when
    parked, delayed for a retry that waits, and otherwise ready (a shed included, whatever its
    delay)."""
    if options.dead_letter:
        return "dead"
    if options.fail:
        return "failed"
    if options.park:
        return "suspended"
    if options.delay_ms > 0 and not is_shed(options):
        return "delayed"
    return "ready"


def nack_attempt(attempt: int, counts_as_attempt: bool) -> int:
    """A hand-back that does not count gives the claim's attempt back (never below zero)."""
    return attempt if counts_as_attempt else max(attempt - 1, 0)


def event_kind_for(options: NackOptions) -> str | None:
    """The event a nack writes: the settled state, `parked`, `retried` when it names an error,
    `handed_back` for a begun run a stopping worker gave back, and none otherwise (a shed or a
    silent requeue writes no happy-path rows)."""
    state = nack_state(options)
    if state in SETTLING_STATES:
        return state
    if options.park:
        return "parked"
    if options.error is not None:
        return "retried"
    if options.handed_back:
        return "handed_back"
    return None


class NackOutcome(NamedTuple):
    """What a nack writes to the row (and its event), computed from the held row's values."""

    state: JobState
    attempt: int
    # None when settling, or handed back in its place: run_at keeps its value.
    run_at: int | None
    queued_at: int
    # True for a shed and a settle: the row keeps its place in line (oldest-ready age grows).
    keeps_queued_at: bool
    finished_at: int | None
    # False when the nack names no error: last_error keeps the previous one.
    replaces_error: bool
    event: str | None


def nack_transition(options: NackOptions, now: int, attempt: int, queued_at: int) -> NackOutcome:
    """The row's next values after a nack, from the held row's `attempt` and `queued_at`."""
    state = nack_state(options)
    next_attempt = nack_attempt(attempt, options.counts_as_attempt)
    replaces_error = options.error is not None
    event = event_kind_for(options)
    if state in SETTLING_STATES:
        return NackOutcome(state, next_attempt, None, queued_at, True, now, replaces_error, event)
    keeps = is_shed(options)
    if keeps and options.delay_ms <= 0:
        # Handed back unstarted with no delay (a shed at a cap, a drain's or a stale claim-ahead's
        # hand-back): it keeps its place in line, run_at and so its rank, and runs first again.
        return NackOutcome(state, next_attempt, None, queued_at, True, None, replaces_error, event)
    run_at = now + max(0, options.delay_ms)
    return NackOutcome(
        state,
        next_attempt,
        run_at,
        queued_at if keeps else run_at,
        keeps,
        None,
        replaces_error,
        event,
    )


def apply_nack(job: JobRecord, options: NackOptions, now: int) -> JobRecord:
    """The held row after a nack: its next values, no worker and no lease."""
    outcome = nack_transition(options, now, job.attempt, job.queued_at)
    update: dict[str, Any] = {
        "state": outcome.state,
        "attempt": outcome.attempt,
        "queued_at": outcome.queued_at,
        "updated_at": now,
        "worker_id": None,
        "lease_expires_at": None,
    }
    if outcome.run_at is not None:
        update["run_at"] = outcome.run_at
    if outcome.finished_at is not None:
        update["finished_at"] = outcome.finished_at
    if outcome.replaces_error:
        update["last_error"] = options.error
    return job.model_copy(update=update)


def _plain(error: Any) -> Any:
    """An error as event data holds it: a structured error as its JSON object."""
    return error.model_dump(mode="json") if isinstance(error, BaseModel) else error


def nack_event_data(options: NackOptions, held_attempt: int, run_at: int | None) -> dict[str, Any]:
    """The data of a nack's event: when a parked job wakes and why, or else the attempt that
    failed (the held row's) and its error."""
    if options.park and not (options.dead_letter or options.fail):
        return {"until": run_at, "reason": _plain(options.error)}
    return {"attempt": held_attempt, "error": _plain(options.error)}


# --- operator actions ---------------------------------------------------------------------------


def can_cancel(state: JobState) -> bool:
    """Only a live job can be cancelled; cancelled is terminal (rule 11)."""
    return state in LIVE_STATES


def cancel_transition(job: JobRecord, now: int) -> JobRecord:
    """The row once cancelled. A running row is told to stop (`cancel_requested`), and keeps its
    lease token so that its holder's next heartbeat learns of the cancel."""
    return job.model_copy(
        update={
            "state": "cancelled",
            "cancel_requested": job.state == "running",
            "updated_at": now,
            "finished_at": now,
        }
    )


def cancel_event_data(previous: JobState) -> dict[str, Any]:
    """The data of the `cancelled` event: the state the job was cancelled from."""
    return {"from": previous}


def can_retry(state: JobState, include_cancelled: bool) -> bool:
    """Failed and dead jobs requeue, and a delayed one is run now instead of at its run_at; a
    cancelled one only when asked explicitly (rule 11)."""
    return (
        state in RETRYABLE_STATES
        or state in RUN_NOW_STATES
        or (include_cancelled and state == "cancelled")
    )


def retry_transition(job: JobRecord, now: int) -> JobRecord:
    """The row once requeued by an operator: ready now, the same run (so completed steps are not
    run again). A failed or dead one starts its attempts again from 0; a delayed one is only run
    early and keeps its count (`Retry(attempts)` counts every run: a "run now" after each failure
    must not keep a job alive for ever). Its last error stays until it succeeds. A delayed job
    keeps the dedupe key it holds; a settled one takes it again (the driver refuses when another
    holds it)."""
    return job.model_copy(
        update={
            "state": "ready",
            "attempt": job.attempt if job.state in RUN_NOW_STATES else 0,
            "run_at": now,
            "queued_at": now,
            "updated_at": now,
            "finished_at": None,
            "cancel_requested": False,
            "worker_id": None,
            "lease_expires_at": None,
        }
    )


def retry_event_data(previous: JobState) -> dict[str, Any]:
    """The data of the `requeued` event: the state the job was requeued from."""
    return {"from": previous}


# --- stats (rule 7) -----------------------------------------------------------------------------


# Stats count what is live and what needs an operator (dead, failed: every row, they are few
# and alerting needs them all). Done and cancelled rows are history: the stats count the ones
# that finished within this window before now, and only about the newest RECENT_SETTLED_CAP of
# either state, so a read costs a bounded number of rows however fast jobs finish. The window is
# the whole history's, whatever a reading filters: a queue or tenant filter chooses which of its
# rows count, not where it starts, so a filter that matches few rows reads no more than one that
# matches all, and a queue reads the same alone as among all queues.
RECENT_SETTLED_STATES: tuple[JobState, ...] = ("done", "cancelled")


def recent_settled_edge(newest: Sequence[int], cap: int) -> int | None:
    """Where one recent state caps the window: the finish time of its cap-th newest row when it
    has more than `cap` since the hour's start (the rows that share that time count too: an ack
    batch shares one), else None. `newest`: those finish times, newest first (the first cap + 1
    are enough)."""
    return newest[cap - 1] if len(newest) > cap else None


def recent_settled_since(edges: Iterable[int | None], now: int) -> int:
    """Where the stats' recent window starts (inclusive): RECENT_SETTLED_MS before now, or the
    latest of the recent states' `recent_settled_edge`s."""
    return max([now - RECENT_SETTLED_MS, *(e for e in edges if e is not None)])


def settled_window_ms(since: int, now: int) -> int:
    """The window a reading's done and cancelled counts cover, from `recent_settled_since`."""
    return max(now - since, 0)


class Settled(NamedTuple):
    """`n` done or cancelled rows of one queue that finished at one instant: what the stats read
    of recent history (a driver may read them apart from the job records)."""

    queue: str
    state: JobState
    finished_at: int
    n: int = 1


def recent_settled_start(rows: Iterable[tuple[str, JobState, int, int]], now: int) -> int:
    """The recent window's start (`recent_settled_since`) from `Settled` rows of every queue and
    tenant: at least every one newer than the start and the cap + 1 newest of each state within
    the hour."""
    hour = now - RECENT_SETTLED_MS
    listed = list(rows)
    edges = []
    for state in RECENT_SETTLED_STATES:
        kept = [r for r in listed if r[1] == state and r[2] >= hour]
        # The cap + 1 newest entries hold at least cap + 1 rows (an entry stands for n >= 1).
        top = heapq.nlargest(RECENT_SETTLED_CAP + 1, kept, key=operator.itemgetter(2))
        each = itertools.chain.from_iterable(itertools.repeat(r[2], r[3]) for r in top)
        newest = list(itertools.islice(each, RECENT_SETTLED_CAP + 1))
        edges.append(recent_settled_edge(newest, RECENT_SETTLED_CAP))
    return recent_settled_since(edges, now)


def recent_settled_counts(
    rows: Iterable[tuple[str, JobState, int, int]], since: int
) -> Counter[tuple[str, JobState]]:
    """The done and cancelled rows among `Settled` rows that finished since `since`, per
    (queue, state)."""
    counted: Counter[tuple[str, JobState]] = Counter()
    for queue, state, at, n in rows:
        if state in RECENT_SETTLED_STATES and at >= since:
            counted[(queue, state)] += n
    return counted


class Placed(Protocol):
    """What a stats filter reads of a row: a record, or a store's few plain fields."""

    @property
    def queue(self) -> str: ...

    @property
    def tenant_id(self) -> str | None: ...


def stats_filter(queues: Sequence[str] | None, tenant_id: str | None) -> Callable[[Placed], bool]:
    """Whether a row is one a reading filtered to `queues` (any when None) and `tenant_id` (any
    when None) counts."""
    listed = None if queues is None else frozenset(queues)
    return lambda job: (
        (listed is None or job.queue in listed)
        and (tenant_id is None or job.tenant_id == tenant_id)
    )


def counts_ready(state: str, run_at: int, queued_at: int, now: int) -> bool:
    """Whether a waiting row (`ready` or `delayed`) counts as ready: due, or a shed. A shed never
    left `ready` and was queued before now, so it counts there while it waits out its delay
    (rule 7). A `ready` row queued after now was made by a clock ahead of this one (since stepped
    back): no claim takes it before its run_at, so it counts delayed until then."""
    return run_at <= now or (state == "ready" and queued_at <= now)


def stats_bucket(job: JobRecord, now: int) -> str:
    """The QueueStats count a row adds to: its state, except that a waiting row is ready or
    delayed as `counts_ready` says."""
    if job.state in ("ready", "delayed"):
        ready = counts_ready(job.state, job.run_at, job.queued_at, now)
        return "ready" if ready else "delayed"
    return job.state


class LiveGroup(NamedTuple):
    """The live rows of one (queue, state) as the stats fold them: how many, how many are due
    (run_at <= now; of `ready` and `delayed` rows, those that `counts_ready`), the oldest
    queued_at of those waiting to be ready counted (`stats_bucket` ready, queued by now), how many
    hold a lease that ran out, and the oldest due run_at."""

    queue: str
    state: JobState
    n: int
    due: int
    oldest_queued_at: int | None
    expired: int
    oldest_due_at: int | None


class CountedApart(NamedTuple):
    """What a driver read of the stats without job records, for the rows its reading counts:
    the live rows folded (`live_groups`), and dead and failed counts per (queue, state)."""

    live: Sequence[LiveGroup]
    settling: Mapping[tuple[str, JobState], int]


def live_groups(rows: Iterable[JobRecord], now: int) -> list[LiveGroup]:
    """Live rows folded per (queue, state), by queue and state."""
    acc: dict[tuple[str, JobState], list[Any]] = {}
    for job in rows:
        g = acc.setdefault((job.queue, job.state), [0, 0, None, 0, None])
        g[0] += 1
        if job.state in ("ready", "delayed"):
            g[1] += counts_ready(job.state, job.run_at, job.queued_at, now)
        else:
            g[1] += job.run_at <= now
        if job.run_at <= now:
            g[4] = job.run_at if g[4] is None else min(g[4], job.run_at)
        if stats_bucket(job, now) == "ready" and job.queued_at <= now:
            g[2] = job.queued_at if g[2] is None else min(g[2], job.queued_at)
        if (job.lease_expires_at or 0) <= now:
            g[3] += 1
    return [LiveGroup(q, st, *g) for (q, st), g in sorted(acc.items())]


def queue_stats(
    jobs: Iterable[JobRecord],
    now: int,
    recent: tuple[int, Iterable[tuple[str, JobState, int, int]]] | None = None,
    *,
    queues: Sequence[str] | None = None,
    tenant_id: str | None = None,
    apart: CountedApart | None = None,
) -> list[QueueStats]:
    """Per-queue stats of the rows a reading filtered to `queues` and `tenant_id` counts, by
    queue name: buckets, the oldest ready age (from `queued_at`), expired leases and overdue
    suspensions. Done and cancelled rows count only within the recent window, which is found
    from every row of `jobs`, or given as `recent` (its start, and the filtered `Settled` rows
    since) by a caller that read them apart; live, dead and failed rows come from `jobs`, or from
    `apart`. A queue with nothing counted is omitted."""
    wanted = stats_filter(queues, tenant_id)
    rows = list(jobs)
    if recent is None:
        settled = [
            (j, (j.queue, j.state, j.finished_at, 1))
            for j in rows
            if j.state in RECENT_SETTLED_STATES and j.finished_at is not None
        ]
        since = recent_settled_start((r for _, r in settled), now)
        counted = recent_settled_counts((r for j, r in settled if wanted(j)), since)
    else:
        since, kept = recent
        counted = recent_settled_counts(kept, since)
    if apart is None:
        others = [j for j in rows if j.state not in RECENT_SETTLED_STATES and wanted(j)]
        live = live_groups((j for j in others if j.state in LIVE_STATES), now)
        settling = Counter((j.queue, j.state) for j in others if j.state not in LIVE_STATES)
        apart = CountedApart(live, settling)
    acc: dict[str, dict[str, int]] = {}

    def add(queue: str, name: str, n: int) -> None:
        counts = acc.setdefault(queue, {})
        counts[name] = counts.get(name, 0) + n

    def oldest(queue: str, name: str, at: int | None) -> None:
        if at is not None:
            counts = acc.setdefault(queue, {})
            counts[name] = max(counts.get(name, 0), now - at)

    for (queue, state), n in sorted([*counted.items(), *apart.settling.items()]):
        if n:
            add(queue, state, n)
    for g in apart.live:
        if g.state in ("ready", "delayed"):  # what counts ready, and the rest (stats_bucket)
            add(g.queue, "ready", g.due)
            add(g.queue, "delayed", g.n - g.due)
        else:
            add(g.queue, g.state, g.n)
        if g.state in ("ready", "delayed"):
            oldest(g.queue, "oldest_ready_ms", g.oldest_queued_at)
        if g.state == "running":
            add(g.queue, "expired_leases", g.expired)
        if g.state == "suspended":
            add(g.queue, "due_suspended", g.due)
            oldest(g.queue, "oldest_due_suspended_ms", g.oldest_due_at)
    window = settled_window_ms(since, now)
    return [
        QueueStats(queue=queue, settled_window_ms=window, **counts)
        for queue, counts in sorted(acc.items())
    ]
