"""`diagnose_queue`: what is stuck, why, and what to run, built on the queue statistics.

Each finding carries a code, the cause with its numbers, a one-line fix and, where a tool call
would act on it, the call itself. Every fix is written with the server's effective context
(`FixContext`), so it runs as given from any directory. Under a tenant pin every count and every
job id comes from that tenant's rows only. A queue asked for that nothing knows is QUEUE_UNKNOWN
(healthy: false), never an empty, healthy answer.

Without a queue the answer is bounded whatever the number of queues: the most severe findings,
then the largest (the jobs each covers), at most `SHOWN`, then a MORE_FINDINGS note with the
call that diagnoses one queue; `finding_counts` counts every finding per code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from engine import bounds
from engine.backfill.errors import dry_run_command
from engine.bounds import MAX_QUEUE_BYTES
from engine.errors import JobUnknownError
from engine.limits import GLOBAL_CAP
from engine.metrics import LIVE_WORKER_WINDOW_MS
from engine.worker_presence import PRESENCE_MS
from mcp_jobs.cap_flags import cap_flags
from mcp_jobs.config import SHOWN
from mcp_jobs.errors import QueueUnknownError
from mcp_jobs.operations.cap_findings import CapHold, cap_hold, serving, strictest_caps
from mcp_jobs.operations.event_waits import EVENT_SCAN, awaited_finding, event_waits
from mcp_jobs.operations.gone_workers import gone_holder_findings
from mcp_jobs.operations.known import run_by_live_workers
from mcp_jobs.operations.models import (
    DiagnoseQueueResult,
    Finding,
    PauseView,
    QueueStatsResult,
    QueueStatsView,
    RateLimitView,
)
from mcp_jobs.operations.outbox import outbox_findings
from mcp_jobs.operations.pauses import pause_findings
from mcp_jobs.operations.rate_limits import holds, rate_findings, rates_in_play
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.stats import busiest, queue_stats
from mcp_jobs.operations.task_findings import task_findings
from mcp_jobs.operations.together import each, together
from mcp_jobs.operations.workers import (
    adopt_published_apps,
    app_unknown,
    live_workers,
    serves,
    worker_command,
)
from schemas.backfill import BackfillState
from schemas.errors import NextCall
from schemas.jobs import JobRecord
from schemas.states import JobState
from schemas.stats import WorkerInfo

# Job ids a finding lists at most.
SAMPLE_IDS = 5

# A diagnosis that waited this long for the database cannot tell live workers' silence (their
# check-ins waited too) from their absence: half a presence beat, one SQLite busy timeout.
WAITED_MS = PRESENCE_MS // 2


# Parked jobs a diagnosis reads to tell unknown names from sleeps, and delayed ones to find
# those waiting out a retry backoff.
PARKED_SCAN = 200


def _due(s: QueueStatsView) -> int:
    """The jobs of a queue that a worker would run now: none while the queue is paused."""
    return 0 if s.paused is not None else s.ready + s.expired_leases + s.due_suspended


async def _ids(
    scope: Scope, state: JobState, queue: str | None, tenant: str | None, limit: int
) -> list[JobRecord]:
    page = await scope.jobs.list(state=state, queue=queue, tenant_id=tenant, limit=limit)
    return page.jobs


async def _pending_declared(scope: Scope) -> list[BackfillState]:
    """The pending backfills; none declared, no read: finding their live passes walks every live
    row where no index leads by name (PostgreSQL: 22 ms at 100,000 live rows), each reload."""
    service = scope.backfills()
    if not len(service.registry):
        return []
    return await service.list(pending_only=True)


def _backlog_old(s: QueueStatsView, age_ms: int) -> bool:
    return bool(s.ready) and s.oldest_ready_ms > age_ms


async def _unheld_old(
    scope: Scope, stats: QueueStatsView, tenant: str | None, age_ms: int, paused: frozenset[str]
) -> tuple[list[JobRecord], bool]:
    """Ready jobs of a queue (a page of it) past `age_ms` that neither a rate limit nor a pause
    of their job (`paused` names) holds back now: in a queue where some are held, these wait
    for workers, not for the limit or the resume. And whether a pause held any of the page."""
    now = scope.jobs.clock.now_ms()
    ready = await _ids(scope, "ready", stats.queue, tenant, PARKED_SCAN)
    unpaused = [r for r in ready if r.name not in paused]
    old = [r for r in unpaused if not holds(stats, r) and now - r.queued_at > age_ms]
    return old, len(unpaused) < len(ready)


def _unheld_said(rated: bool, paused: bool) -> str:
    """What the ready jobs a BACKLOG_OLD counts beside held ones are free of."""
    if rated and paused:
        return " under no rate limit or job pause"
    if rated or paused:
        return " under no rate limit" if rated else " of no paused job"
    return ""


async def _cap_hold(
    scope: Scope, stats: QueueStatsView, workers: list[WorkerInfo], tenant: str | None
) -> CapHold:
    """The full caps that hold back the ready jobs of `stats`' queue (a page of them)."""
    ready, running = await together(
        _ids(scope, "ready", stats.queue, tenant, PARKED_SCAN),
        _ids(scope, "running", stats.queue, tenant, PARKED_SCAN),
    )
    return await cap_hold(scope, stats, workers, ready, running)


async def _stats_or_unknown(
    scope: Scope, queue: str | None
) -> QueueStatsResult | QueueUnknownError:
    """The stats, of `queue` alone when given; a queue nothing knows is a finding, not a refusal
    (queue_stats checks the name only when the queue has no rows to count)."""
    try:
        return await queue_stats(scope, [queue] if queue else None, limit=None)
    except QueueUnknownError as refused:
        return refused


def _queue_unknown(
    queue: str | None, refused: QueueUnknownError, mend: Callable[[BaseException], BaseException]
) -> Finding:
    """QUEUE_UNKNOWN as a finding; its fix and next_call as the face mends the refusal (the
    call with the queue it plainly stands for), as queue_stats' refusal is."""
    mended = mend(refused)
    if isinstance(mended, QueueUnknownError):
        refused = mended
    return Finding(
        code=refused.code,
        severity="warning",
        queue=queue,
        cause=refused.cause,
        fix=refused.fix,
        next_call=refused.next_call,
    )


def _as_is(exc: BaseException) -> BaseException:
    return exc


async def diagnose_queue(
    scope: Scope,
    queue: str | None = None,
    *,
    mend: Callable[[BaseException], BaseException] = _as_is,
) -> DiagnoseQueueResult:
    queue = bounds.optional_text("queue", queue, MAX_QUEUE_BYTES)  # "" is no queue, not all
    tenant = scope.tenant(None)
    findings: list[Finding] = []
    # The reads are independent of one another: each round runs at once, then the findings are
    # written from what came back (after the published apps are adopted for the fix lines).
    started_ms = scope.jobs.clock.now_ms()
    counted, workers, (_, run_live), backfills = await together(
        _stats_or_unknown(scope, queue),
        live_workers(scope),
        together(adopt_published_apps(scope), run_by_live_workers(scope)),
        _pending_declared(scope),
    )
    stats: list[QueueStatsView] = []
    paused_jobs: list[PauseView] = []
    tenant_rates: list[RateLimitView] = []
    if isinstance(counted, QueueUnknownError):
        findings.append(_queue_unknown(queue, counted, mend))
    else:
        stats, paused_jobs = counted.queues or [], counted.paused_jobs or []
        tenant_rates = counted.tenant_rate_limits or []
        findings.extend(outbox_findings(scope, counted.outbox, len(workers)))
    # Only the queues with the most dead jobs can have their DEAD_LETTERS finding listed
    # (largest first): the others are counted without a sample read.
    dead_queues = [s.queue for s in sorted(stats, key=lambda s: (-s.dead, s.queue)) if s.dead]
    dead_queues = dead_queues[:SHOWN] if queue is None else dead_queues
    parked_queues = [s.queue for s in stats if s.suspended]
    delayed_queues = [s.queue for s in stats if s.delayed]
    dead_pages, parked_pages, delayed_pages, (paused, gone) = await together(
        each(_ids(scope, "dead", q, tenant, SAMPLE_IDS) for q in dead_queues),
        each(_ids(scope, "suspended", q, tenant, PARKED_SCAN) for q in parked_queues),
        each(_ids(scope, "delayed", q, tenant, PARKED_SCAN) for q in delayed_queues),
        together(
            pause_findings(scope, stats, paused_jobs, queue),
            gone_holder_findings(scope, stats, workers, tenant, SHOWN if queue is None else None),
        ),
    )
    dead_of = dict(zip(dead_queues, dead_pages, strict=True))
    parked_of = dict(zip(parked_queues, parked_pages, strict=True))
    # The page is newest first: its oldest rows are read for their event waits.
    scanned = {q: parked_of[q][-EVENT_SCAN:] for q in parked_queues}
    waits = await each(event_waits(scope, scanned[q]) for q in parked_queues)
    waits_of = dict(zip(parked_queues, waits, strict=True))
    delayed_of = dict(zip(delayed_queues, delayed_pages, strict=True))
    now = scope.jobs.clock.now_ms()
    limits = scope.settings.limits

    expired_queues = [s.queue for s in stats if s.expired_leases]
    running = await each(_ids(scope, "running", q, tenant, PARKED_SCAN) for q in expired_queues)
    expired_of = {
        q: [j.id for j in page if (j.lease_expires_at or now) < now][:SAMPLE_IDS]
        for q, page in zip(expired_queues, running, strict=True)
    }
    # A paused queue's due jobs wait for its resume, not for a worker (QUEUE_PAUSED says so).
    paused_queues = {s.queue for s in stats if s.paused is not None}
    waiting = sum(_due(s) for s in stats)
    waited_ms = now - started_ms
    if not workers and waiting:
        # A sample of the jobs that wait, as the enqueue's and the wait's notices name theirs:
        # the ready ones, then those whose lease ran out (counted among the due).
        read = PARKED_SCAN if paused_queues else SAMPLE_IDS  # past the paused queues' jobs
        due = [] if waited_ms >= WAITED_MS else await _ids(scope, "ready", queue, tenant, read)
        ids = [j.id for j in due if j.queue not in paused_queues] + [
            i for q in expired_queues if q not in paused_queues for i in expired_of[q]
        ]
        findings.append(_no_workers(scope, queue, waiting, waited_ms, ids[:SAMPLE_IDS]))
    unserved = [
        s
        for s in (stats if workers else [])
        if _due(s) and not any(serves(w, s.queue) for w in workers)
    ]
    samples = await each(_ids(scope, "ready", s.queue, tenant, SAMPLE_IDS) for s in unserved)
    for s, sample in zip(unserved, samples, strict=True):
        due_count = _due(s)
        findings.append(
            Finding(
                code="NO_LIVE_WORKERS",
                severity="critical",
                queue=s.queue,
                cause=f"{due_count} job(s) in queue {s.queue} are due and none of the "
                f"{len(workers)} live worker(s) serves this queue" + app_unknown(scope),
                fix=worker_command(scope, s.queue),
                job_ids=([j.id for j in sample] + expired_of.get(s.queue, []))[:SAMPLE_IDS],
            ).sized(due_count)
        )

    # Work a rate limit holds back is RATE_LIMITED (info), and a pause's is QUEUE_PAUSED or
    # JOB_PAUSED (the fix a resume), not an old backlog for more workers, which would start none
    # of it; other jobs of its queue waiting as long still are.
    # A tenant's rate limit spans queues: each queue's ready jobs are judged under it too.
    rate_held = await rates_in_play(scope, stats, tenant_rates)
    rated = rate_findings(scope, rate_held, len(workers))
    held = {f.queue for f in rated}
    paused_names = frozenset(p.name for p in paused_jobs)
    old = [s.queue for s in stats if s.paused is None and _backlog_old(s, limits.backlog_age_ms)]
    held_old = [s for s in rate_held if s.queue in old and (s.queue in held or paused_names)]
    age_ms = limits.backlog_age_ms
    unheld_of = dict(
        zip(
            [s.queue for s in held_old],
            await each(_unheld_old(scope, s, tenant, age_ms, paused_names) for s in held_old),
            strict=True,
        )
    )
    old = [q for q in old if q not in unheld_of or unheld_of[q][0]]
    old_stats = [s for s in stats if s.queue in old]
    holds_of = await each(_cap_hold(scope, s, workers, tenant) for s in old_stats)
    capped_of = dict(zip(old, holds_of, strict=True))

    def joining(queue: str) -> str:
        """The line that starts a worker beside the live ones serving `queue`, keeping their
        caps: started without them, it would run what they hold back."""
        return worker_command(scope, queue, *cap_flags(strictest_caps(serving(workers, queue))))

    for s in stats:
        if s.expired_leases:
            findings.append(
                Finding(
                    code="LEASES_EXPIRED",
                    severity="warning",
                    queue=s.queue,
                    cause=f"{s.expired_leases} running job(s) in queue {s.queue} hold leases "
                    "that ran out: their worker died or lost the database. Any live worker "
                    "claims them again and their completed steps are not re-run",
                    fix=joining(s.queue),
                    job_ids=expired_of[s.queue],
                ).sized(s.expired_leases)
            )
        if s.queue in capped_of:
            why, fix, call = _backlog_why(scope, s.queue, capped_of[s.queue])
            ready, waited, said = s.ready, s.oldest_ready_ms, ""
            if s.queue in unheld_of:  # beside the work a rate limit or a pause holds back
                unheld, pause_held = unheld_of[s.queue]
                ready = len(unheld)
                waited = max(now - r.queued_at for r in unheld)
                said = _unheld_said(s.queue in held, pause_held)
            findings.append(
                Finding(
                    code="BACKLOG_OLD",
                    severity="warning",
                    queue=s.queue,
                    cause=f"queue {s.queue} has {ready} ready job(s)"
                    + said
                    + f" and the oldest has waited {waited // 1000} s (threshold "
                    f"{limits.backlog_age_ms // 1000} s): " + why,
                    fix=fix,
                    next_call=call,
                ).sized(ready)
            )
        if s.due_suspended and s.oldest_due_suspended_ms > limits.backlog_age_ms:
            findings.append(
                Finding(
                    code="SUSPENSIONS_OVERDUE",
                    severity="warning",
                    queue=s.queue,
                    cause=f"{s.due_suspended} suspended job(s) in queue {s.queue} passed their "
                    f"wake-up time {s.oldest_due_suspended_ms // 1000} s ago and no worker has "
                    "resumed them",
                    fix=joining(s.queue),
                ).sized(s.due_suspended)
            )
        if s.dead:
            dead = dead_of.get(s.queue, [])
            first = dead[0].id if dead else None
            newest_error = dead[0].last_error if dead else None
            failed_with = (
                f"; the newest failed with {newest_error.code}: {newest_error.cause}"
                if newest_error
                else ""
            )
            findings.append(
                Finding(
                    code="DEAD_LETTERS",
                    severity="warning",
                    queue=s.queue,
                    cause=f"{s.dead} job(s) in queue {s.queue} used every attempt and are dead"
                    + failed_with,
                    fix=f"mcp-jobs jobs show {first} --json"
                    if first
                    else "mcp-jobs jobs ls --json",
                    next_call=NextCall(tool="inspect_job", arguments={"job_id": first})
                    if first
                    else None,
                    job_ids=[d.id for d in dead],
                    last_error=newest_error,
                ).sized(s.dead)
            )
        if s.suspended:
            findings.extend(_unknown_names(scope, s.queue, parked_of[s.queue], run_live))
            awaited = awaited_finding(
                scope, s.queue, waits_of[s.queue], len(parked_of[s.queue]), now
            )
            findings.extend([awaited] if awaited is not None else [])
        if s.delayed:
            findings.extend(_retries_waiting(scope, s.queue, delayed_of[s.queue], now))

    findings.extend(await task_findings(scope, queue))
    # An unknown queue has no stats and no paused jobs: these find nothing there.
    findings.extend(paused)
    findings.extend(gone)
    findings.extend(rated)
    findings.extend(_pending_backfills(scope, backfills))
    severity_rank = {"critical": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: (severity_rank[f.severity], -f.size, f.queue or "", f.code))
    healthy = not any(f.severity != "info" for f in findings)
    counts = Counter(f.code for f in findings)
    listed, left = (findings[:SHOWN], findings[SHOWN:]) if queue is None else (findings, [])
    queues, queues_left_out = busiest(stats, SHOWN)
    result = DiagnoseQueueResult(
        ok=True,
        healthy=healthy,
        findings=[*listed, _more_findings(scope, left)] if left else listed,
        finding_counts=dict(sorted(counts.items())) or None,
        live_workers=len(workers),
        queues=queues,
        queues_left_out=queues_left_out or None,
        at=now,
    )
    return scope.fixes.qualify_all(result)


def _backlog_why(scope: Scope, queue: str, hold: CapHold) -> tuple[str, str, NextCall | None]:
    """Why an old backlog waits, its fix and the call that acts on it: the full caps when every
    sampled ready job waits for one (a bigger worker would start none of it), else a worker."""
    full = "; ".join(c.said() for c in hold.caps)
    if not hold.whole:
        why = "workers are too few, saturated by caps, or not listening on this queue"
        if hold.held:
            why += f" ({hold.held} of the {hold.sampled} newest wait for a full cap: {full})"
        said = {f"queue:{queue}": "the queue's cap of {}", GLOBAL_CAP: "the global cap of {}"}
        shared = [said[k].format(c) for k, c in hold.kept.items() if k in said]
        if shared and scope.settings.tenant is not None:
            # Those count every tenant's running jobs, which a pinned answer does not read.
            why += f"; the workers keep {' and '.join(shared)}, which count every tenant's "
            why += "running jobs: an answer pinned to one tenant cannot tell if they are full"
        # Started without the caps its peers keep, the worker would run what they hold back.
        line = worker_command(scope, queue, "--concurrency", "32", *cap_flags(hold.kept))
        return why, line, None
    why = f"every ready job waits for a full concurrency cap: {full}; more workers would not "
    why += "start them sooner"
    if hold.jobs_only:  # the job's own cap, declared with it: raising it is the one-line fix
        name, cap = hold.caps[0].key.removeprefix("job:"), hold.caps[0].cap
        return why, f'@job(concurrency={cap * 2}) on "{name}"', None
    # Caps a worker's Limits set: the running jobs hold their slots until they end.
    why += " (the running jobs hold its slots until they end)"
    arguments = {"queue": queue, "state": "running"}
    fix = scope.fixes.command("jobs", "ls", "--queue", queue, "--state", "running", "--json")
    return why, fix, NextCall(tool="list_jobs", arguments=arguments)


def _no_workers(
    scope: Scope, queue: str | None, waiting: int, waited_ms: int, job_ids: list[str]
) -> Finding:
    """NO_LIVE_WORKERS; or, when this diagnosis itself waited on the database (a write lock
    another process held on SQLite, an outage elsewhere), DATABASE_WAITED: the workers' check-ins
    waited on it too, so their silence shows no absence, and a worker started for it would
    run beside the live ones (exploreQ)."""
    window_s = LIVE_WORKER_WINDOW_MS // 1000
    if waited_ms < WAITED_MS:
        return Finding(
            code="NO_LIVE_WORKERS",
            severity="critical",
            cause=f"{waiting} job(s) are due and no worker has checked in during the last "
            f"{window_s} s, so nothing will run them" + app_unknown(scope),
            fix=worker_command(scope),
            job_ids=job_ids,
        ).sized(waiting)
    words = ("jobs", "diagnose") if queue is None else ("jobs", "diagnose", "--queue", queue)
    return Finding(
        code="DATABASE_WAITED",
        severity="warning",
        cause=f"this diagnosis waited {waited_ms / 1000:.1f} s for the database (on SQLite, a "
        "write lock another process held; elsewhere, an outage), and the workers' check-ins "
        f"wait on it as well: that none checked in during the last {window_s} s does not show "
        f"they are gone. {waiting} job(s) are due; diagnose again once the database answers "
        "at once, before starting a worker",
        fix=scope.fixes.command(*words),
        next_call=NextCall(
            tool="diagnose_queue", arguments={} if queue is None else {"queue": queue}
        ),
    ).sized(waiting)


def _more_findings(scope: Scope, left: list[Finding]) -> Finding:
    """The note that ends a cut list: what was left out, per code, and the call that diagnoses
    the first of their queues in full."""
    per_code = ", ".join(f"{c} {n}" for c, n in Counter(f.code for f in left).most_common())
    queue = next((f.queue for f in left if f.queue is not None), None)
    if queue is None:
        fix, call = scope.fixes.command("jobs", "stats"), NextCall(tool="queue_stats", arguments={})
    else:
        fix = scope.fixes.command("jobs", "diagnose", "--queue", queue)
        call = NextCall(tool="diagnose_queue", arguments={"queue": queue})
    return Finding(
        code="MORE_FINDINGS",
        severity="info",
        cause=f"{len(left)} more finding(s) are not listed ({per_code}): the {SHOWN} above are "
        "the most severe, then the largest; finding_counts counts every one. Diagnose one "
        "queue to see all of its own",
        fix=fix,
        next_call=call,
    )


def _unknown_names(
    scope: Scope, queue: str, parked: list[JobRecord], run_live: set[str]
) -> list[Finding]:
    """Suspended rows a worker parked because it did not know their name (rule 7: parked, no
    attempt; the park leaves JOB_UNKNOWN as the row's error) and no live worker publishes it.
    A sleep or an event wait is no such park, whatever this process has imported; and a sleep
    keeps the row's error, so a JOB_UNKNOWN under a name a live worker runs is an old park."""
    by_name: dict[str, list[str]] = {}
    for job in parked:
        error = job.last_error
        parked_unknown = error is not None and error.code == JobUnknownError.code
        if parked_unknown and job.name not in run_live:
            by_name.setdefault(job.name, []).append(job.id)
    return [
        Finding(
            code="PARKED_UNKNOWN_NAME",
            severity="critical",
            queue=queue,
            cause=f'{len(ids)} job(s) named "{name}" in queue {queue} are parked: no worker '
            "that claimed them has this job registered (a deploy that renamed or removed it, "
            "or a worker started without the module that declares it)",
            fix=worker_command(scope, queue),
            job_ids=ids[:SAMPLE_IDS],
        ).sized(len(ids))
        for name, ids in sorted(by_name.items())
    ]


def _retries_waiting(scope: Scope, queue: str, delayed: list[JobRecord], now: int) -> list[Finding]:
    """Delayed jobs that failed and wait out their retry backoff. They run again by themselves
    (info, not unhealthy); the finding says why they failed and, for the most common error
    code, the call that runs them now once that cause is over."""
    failing = [(j, j.last_error) for j in delayed if j.last_error is not None]
    if not failing:
        return []
    codes = Counter(error.code for _, error in failing)
    code = codes.most_common(1)[0][0]
    newest_first = sorted(
        ((j, e) for j, e in failing if e.code == code), key=lambda p: p[0].updated_at, reverse=True
    )
    error = newest_first[0][1]
    due_in_s = max(min(j.run_at for j, _ in failing) - now, 0) // 1000
    count = str(len(failing)) if len(delayed) < PARKED_SCAN else f"at least {len(failing)}"
    per_code = ", ".join(f"{c} {n}" for c, n in codes.most_common(3))
    return [
        Finding(
            code="RETRIES_WAITING",
            severity="info",
            queue=queue,
            cause=f"{count} job(s) in queue {queue} failed and wait out a retry backoff "
            f"({per_code}); the next is due in {due_in_s} s. They run again by themselves; once "
            f"the cause is over (the newest {code}: {error.cause}), a retry runs them now",
            fix=scope.fixes.command(
                "jobs", "retry-all", "--queue", queue, "--state", "delayed", "--error-code", code
            ),
            next_call=NextCall(
                tool="retry_jobs",
                arguments={"queue": queue, "states": ["delayed"], "error_code": code},
            ),
            job_ids=[j.id for j, _ in newest_first[:SAMPLE_IDS]],
            last_error=error,
        ).sized(len(failing))
    ]


def _pending_backfills(scope: Scope, pending: list[BackfillState]) -> list[Finding]:
    out: list[Finding] = []
    for state in pending:
        if state.live_job_id:
            continue  # running now: nothing to do but wait
        arguments: dict[str, Any] = {"name": state.name}
        out.append(
            Finding(
                code="BACKFILL_PENDING",
                severity="info",
                cause=f'backfill "{state.name}" is declared for {scope.settings.environment} '
                "and has not completed here",
                fix=dry_run_command(state.name),
                next_call=NextCall(tool="run_backfill", arguments=arguments),
            )
        )
    return out
