"""Bulk retry and cancel by filter, as a plan and then an action on exactly that plan.

A plan is the set of jobs a filter matches now (name, queue, tenant, states, the stored
`last_error.code`, and the last change within `since_seconds`), newest first and at most
`MAX_BULK_JOBS`: each with the `updated_at` it had when planned. Acting walks that set through
the engine's own per-job retry or cancel (its rules, its `requeued`/`cancelled` events with the
actor), and a job that changed since — retried by someone else, settled, cancelled — is skipped
and reported, never an error: the action is a no-op for it, not a failure of the rest.

More matches than `MAX_BULK_JOBS`: the plan says so (`over_limit`) and how many match (`total`),
and acting takes the newest `MAX_BULK_JOBS`; what it acts on no longer matches (a retried job is
not dead, a cancelled one not live), so planning again gives the next page. The read behind a
plan, the count included, is bounded too (`COUNT_SCAN_ROWS`); `scan_capped` says it stopped
short, and `total` is then a lower bound.

An action writes its own audit event (`operations.audit`, the tool's event, whichever face ran
it) however it ends: done, failed part way, or cut short (a cancelled call, a Ctrl-C), with the
counts so far. A job in hand finishes before a cancel lands, so those counts are exact.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from anyio.lowlevel import checkpoint
from pydantic import BaseModel, Field

from engine import bounds
from engine.bounds import MAX_DELAY_SECONDS
from engine.errors import JobsError
from engine.instants import iso
from engine.job_selection import SELECT_SCAN_LIMIT
from mcp_jobs.operations.audit import record_call
from mcp_jobs.operations.known import unknown_error_code, unknown_filter
from mcp_jobs.operations.models import ConfirmOffer, Envelope, Finding
from mcp_jobs.operations.scope import Scope
from mcp_jobs.operations.tenant_spelling import tenant_spelt_otherwise
from schemas.jobs import JobRecord
from schemas.states import LIVE_STATES, RETRYABLE_STATES, JobState

BulkAction = Literal["retry", "cancel"]

# One action touches at most this many jobs: a plan a person can still be shown as counts, and
# an action that ends within one call. More: act in pages (see the module docstring).
MAX_BULK_JOBS = 1000
# since_seconds: a second at least, ten years at most (the tools publish this range).
SINCE_SECONDS = (1, MAX_DELAY_SECONDS)
# The plan shows this many jobs by id; the counts cover all.
SAMPLE_JOBS = 20
# The skip code of a job whose row changed between the plan and the action.
CHANGED = "CHANGED_SINCE_PLAN"
# A plan counts the matches past the cap over at most this many rows read: 20 list pages, so a
# plan of 200,000 matches costs a bounded read and says "at least 20,000".
COUNT_SCAN_ROWS = SELECT_SCAN_LIMIT
# How long the audit event of an action cut short may take to write (shielded from the cancel).
AUDIT_WRITE_S = 10.0


class BulkFilter(BaseModel):
    """What a bulk action matches; unset fields match everything."""

    name: str | None = None
    queue: str | None = None
    tenant_id: str | None = None
    states: list[JobState] | None = None
    error_code: str | None = None
    since_seconds: int | None = None

    def given(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class BulkJob(BaseModel):
    job_id: str
    name: str
    queue: str
    tenant_id: str | None = None
    state: JobState
    error_code: str | None = Field(default=None, description="its stored last_error.code")


class BulkPlan(BaseModel):
    action: BulkAction
    at: int = Field(description="when the plan was taken, epoch ms (since_seconds counts back)")
    states: list[JobState] = Field(description="the states matched")
    matched: int = Field(description="jobs the action acts on")
    total: int = Field(description="jobs the filter matches now (at least, when scan_capped)")
    over_limit: bool = Field(
        description=f"more than {MAX_BULK_JOBS} match: this acts on the newest "
        f"{MAX_BULK_JOBS}; plan again after it for the rest, or narrow the filter"
    )
    scan_capped: bool = Field(
        description="the read stopped before the end of history: more may match; narrow it"
    )
    by_name: dict[str, int]
    by_queue: dict[str, int]
    by_tenant: dict[str, int] = Field(description="'' is no tenant")
    by_error_code: dict[str, int] = Field(description="'' is no stored error")
    sample: list[BulkJob] = Field(description=f"the newest {SAMPLE_JOBS}")


class BulkSkip(BaseModel):
    job_id: str
    code: str = Field(description=f"{CHANGED}, or the engine's refusal (e.g. JOB_NOT_RETRYABLE)")
    reason: str


class BulkOutcome(BaseModel):
    acted: int
    acted_ids: list[str]
    skipped: list[BulkSkip] = Field(description="planned jobs left as they are, and why")
    interrupted: bool | None = Field(
        default=None, description="true: stopped before the end of the plan; plan again"
    )


class BulkJobsResult(Envelope):
    mode: Literal["plan", "write"] | None = Field(
        default=None, description="plan wrote nothing; write acted on the plan"
    )
    filter: dict[str, Any] | None = None
    plan: BulkPlan | None = None
    outcome: BulkOutcome | None = Field(default=None, description="write: what was done")
    confirm: ConfirmOffer | None = Field(
        default=None, description="plan: the token that acts on exactly this plan"
    )
    act_command: str | None = Field(
        default=None,
        description="CLI: the command that acts (a fresh plan, then --yes): after a plan, or "
        "for the rest after an interrupted action",
    )
    notices: list[Finding] | None = Field(
        default=None,
        description="plan: SCOPE_MISSING when this access token may not act on it (no confirm "
        "token is offered), with what the operator grants; TENANT_SPELT_OTHERWISE when it "
        "matched nothing of a tenant stored in another case",
    )


# A plan's jobs as they were: (id, updated_at).
Planned = list[tuple[str, int]]


@dataclass
class BulkRun:
    """An action as it goes: what it did so far, which its caller reads when it was cut short
    (a cancel raises), and whether it wrote its audit event (then the caller writes none)."""

    acted: list[str] = field(default_factory=list)
    skipped: list[BulkSkip] = field(default_factory=list)
    interrupted: bool = False
    recorded: bool = False

    def outcome(self) -> BulkOutcome:
        return BulkOutcome(
            acted=len(self.acted),
            acted_ids=list(self.acted),
            skipped=list(self.skipped),
            interrupted=self.interrupted or None,
        )


def states_of(action: BulkAction, states: Sequence[str] | None) -> tuple[JobState, ...]:
    """The states an action matches: those asked, else a retry's failed and dead and a
    cancel's live ones. The tools' argument types keep each action to its own states."""
    default = "failed and dead" if action == "retry" else "every live state"
    bounds.narrowing("states", states, default)
    if states:
        return tuple(dict.fromkeys(states))  # type: ignore[arg-type]
    return RETRYABLE_STATES if action == "retry" else LIVE_STATES


async def plan_bulk(
    scope: Scope, action: BulkAction, wanted: BulkFilter, at: int | None = None
) -> tuple[BulkPlan, Planned]:
    """The plan of `action` over `wanted` at `at` (None: now), in the scope's tenant."""
    at = scope.jobs.clock.now_ms() if at is None else at
    states = states_of(action, wanted.states)
    after = None
    if wanted.since_seconds is not None:
        since = bounds.whole("since_seconds", wanted.since_seconds, *SINCE_SECONDS, "seconds")
        after = at - since * 1000
    tenant = scope.tenant(wanted.tenant_id)
    found = await scope.jobs.select(
        state=states,
        name=wanted.name,
        queue=wanted.queue,
        tenant_id=tenant,
        error_code=wanted.error_code,
        changed_after=after,
        limit=MAX_BULK_JOBS,
        scan_limit=COUNT_SCAN_ROWS,
        count=True,
    )
    jobs = found.jobs
    if not jobs:
        # A name or queue nothing knows is a typo, not a plan of nothing to confirm (as list_jobs).
        unknown = await unknown_filter(scope, wanted.name, wanted.queue, tenant)
        if unknown is not None:
            raise unknown
        if wanted.error_code is not None:

            async def held() -> list[str]:
                unfiltered = wanted.model_copy(update={"error_code": None})
                plan, _ = await plan_bulk(scope, action, unfiltered, at)
                return [code for code in plan.by_error_code if code]

            code = await unknown_error_code(scope, action, wanted.error_code, held)
            if code is not None:
                raise code
    plan = BulkPlan(
        action=action,
        at=at,
        states=list(states),
        matched=len(jobs),
        total=found.matching,
        over_limit=found.more,
        scan_capped=found.scan_capped,
        by_name=dict(Counter(j.name for j in jobs)),
        by_queue=dict(Counter(j.queue for j in jobs)),
        by_tenant=dict(Counter(j.tenant_id or "" for j in jobs)),
        by_error_code=dict(Counter(_code(j) or "" for j in jobs)),
        sample=[_shown(j) for j in jobs[:SAMPLE_JOBS]],
    )
    return plan, [(j.id, j.updated_at) for j in jobs]


async def act_bulk(
    scope: Scope,
    action: BulkAction,
    plan: BulkPlan,
    planned: Sequence[tuple[str, int]],
    given: dict[str, Any],
    run: BulkRun | None = None,
    stop: anyio.Event | None = None,
) -> BulkOutcome:
    """`action` on each planned job through the engine's per-job rules; a job that changed since
    the plan (a retry's row updated) or that the engine refuses now is skipped, with why. `stop`
    set ends it before the next job (`interrupted`); a cancel ends it there too, and raises.
    Either way its audit event (the filter `given` and the counts) is written."""
    run = BulkRun() if run is None else run
    tenant = scope.tenant(None)
    failure: BaseException | None = None
    try:
        for job_id, updated_at in planned:
            if stop is not None and stop.is_set():
                run.interrupted = True
                break
            # The job in hand finishes before a cancel lands: the counts stay exact.
            with anyio.CancelScope(shield=True):
                await _act_one(scope, action, job_id, updated_at, plan.states, tenant, run)
            await checkpoint()
    except BaseException as exc:
        run.interrupted, failure = True, exc
        raise
    finally:
        with anyio.move_on_after(AUDIT_WRITE_S, shield=True):
            await _record(scope, action, given, plan, run, failure)
    return run.outcome()


async def _act_one(
    scope: Scope,
    action: BulkAction,
    job_id: str,
    updated_at: int,
    states: Sequence[str],
    tenant: str | None,
    run: BulkRun,
) -> None:
    try:
        if action == "retry":
            current = await scope.jobs.get(job_id, tenant_id=tenant)
            # A cancel keeps no such check: a queued job that started running since is
            # still the live job the person meant to stop.
            if current.updated_at != updated_at:
                reason = f"now {current.state}, changed at {iso(current.updated_at)}"
                run.skipped.append(BulkSkip(job_id=job_id, code=CHANGED, reason=reason))
                return
            await scope.jobs.retry(
                job_id,
                tenant_id=tenant,
                include_cancelled="cancelled" in states,
                actor=scope.actor,
            )
        else:
            await scope.jobs.cancel(job_id, tenant_id=tenant, actor=scope.actor)
    except JobsError as exc:
        run.skipped.append(BulkSkip(job_id=job_id, code=exc.code, reason=exc.cause))
        return
    run.acted.append(job_id)


async def _record(
    scope: Scope,
    action: BulkAction,
    given: dict[str, Any],
    plan: BulkPlan,
    run: BulkRun,
    failure: BaseException | None,
) -> None:
    """The action's one audit event: the tool's, so every face's actions read alike."""
    envelope: dict[str, Any] = {"ok": not run.interrupted}
    if failure is not None and isinstance(failure, Exception):
        envelope["error"] = {"code": getattr(failure, "code", "INTERNAL")}
    counts = {
        "matched": plan.matched,
        "acted": len(run.acted),
        "skipped": len(run.skipped),
        "interrupted": run.interrupted,
    }
    audit = {**given, "write": True, **counts}
    await record_call(scope, f"{action}_jobs", envelope, (None, None), audit)
    run.recorded = True


async def bulk_command(
    scope: Scope,
    action: BulkAction,
    wanted: BulkFilter,
    *,
    act: bool,
    words: Sequence[str],
    stop: anyio.Event | None = None,
) -> BulkJobsResult:
    """The CLI's `jobs retry-all|cancel-all`: the plan, and with `act` the action on that plan
    at once (the person at the terminal said --yes); without, the command that acts. `stop`
    (a Ctrl-C) ends the action between jobs: the answer then says how far it got and carries
    the command that acts on the rest."""
    shown, planned = await plan_bulk(scope, action, wanted)
    given = wanted.given()
    # No command that acts on a plan of nothing: run, it would do nothing again.
    command = scope.fixes.command(*words, "--yes") if shown.matched else None
    notices = await plan_notices(scope, wanted, shown) or None
    if not act:
        return BulkJobsResult(
            ok=True, mode="plan", filter=given, plan=shown, act_command=command, notices=notices
        )
    outcome = await act_bulk(scope, action, shown, planned, given, stop=stop)
    # The rest: a fresh plan of what still matches, acted on (what this did no longer matches).
    rest = command if outcome.interrupted or shown.over_limit else None
    return BulkJobsResult(
        ok=True,
        mode="write",
        filter=given,
        plan=shown,
        outcome=outcome,
        act_command=rest,
        notices=notices,
    )


async def plan_notices(scope: Scope, wanted: BulkFilter, plan: BulkPlan) -> list[Finding]:
    """What a plan of nothing says beside it: a tenant typed in another case than the one
    stored (a tenant is matched exactly, so the plan of `ACME` found none of `acme`'s jobs)."""
    if plan.matched:
        return []
    states = list(plan.states)
    return await tenant_spelt_otherwise(
        scope, wanted.tenant_id, state=states, name=wanted.name, queue=wanted.queue
    )


def summary(plan: BulkPlan) -> str:
    """The plan in one paragraph, as a person is asked to confirm it."""

    def counted(counts: dict[str, int]) -> str:
        items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{k or '-'} {n}" for k, n in items[:12])
        return shown + (f" and {len(items) - 12} more" if len(items) > 12 else "") or "none"

    text = f"{plan.action} {plan.matched} job(s) in state {'/'.join(plan.states)}"
    if plan.over_limit or plan.scan_capped:
        least = "at least " if plan.scan_capped else ""
        text = (
            f"{plan.action} the newest {plan.matched} of {least}{plan.total} job(s) in state "
            f"{'/'.join(plan.states)} (act, then plan again for the rest)"
        )
    ids = ", ".join(f"{j.job_id} {j.error_code or '-'}" for j in plan.sample[:5]) or "none"
    return (
        f"{text}; per name: {counted(plan.by_name)}; per queue: {counted(plan.by_queue)}; per "
        f"tenant: {counted(plan.by_tenant)}; per error code: {counted(plan.by_error_code)}; "
        f"first: {ids}."
    )


def _code(job: JobRecord) -> str | None:
    return job.last_error.code if job.last_error is not None else None


def _shown(job: JobRecord) -> BulkJob:
    return BulkJob(
        job_id=job.id,
        name=job.name,
        queue=job.queue,
        tenant_id=job.tenant_id,
        state=job.state,
        error_code=_code(job),
    )
