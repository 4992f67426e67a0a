"""Bulk retry and cancel by filter, as a plan and then an action on exactly that plan.

A plan is the set of jobs a filter matches now (name, queue, tenant, states, the stored
`last_error.code`, and the last change within `since_seconds`), newest first and at most
`MAX_BULK_JOBS`: each with the `updated_at` it had when planned. Acting walks that set through
the engine's own per-job retry or cancel (its rules, its `requeued`/`cancelled` events with the
actor), and a job that changed since — retried by someone else, settled, cancelled — is skipped
and reported, never an error: the action is a no-op for it, not a failure of the rest.

More matches than `MAX_BULK_JOBS`: the plan says so (`over_limit`) and acting takes the newest
`MAX_BULK_JOBS`; what it acts on no longer matches (a retried job is not dead, a cancelled one
not live), so planning again gives the next page. The read behind a plan is bounded too
(`engine.client.SELECT_SCAN_LIMIT` rows); `scan_capped` says it stopped short.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from engine import bounds
from engine.bounds import MAX_DELAY_SECONDS
from engine.errors import JobsError
from engine.instants import iso
from mcp_jobs.operations.known import unknown_filter
from mcp_jobs.operations.models import ConfirmOffer, Envelope
from mcp_jobs.operations.scope import Scope
from schemas.jobs import JobRecord
from schemas.states import LIVE_STATES, RETRYABLE_STATES, JobState

BulkAction = Literal["retry", "cancel"]
# Delayed only when named: a retry runs it now (rules.can_retry), which no default should do.
RetryState = Literal["failed", "dead", "cancelled", "delayed"]
CancelState = Literal["ready", "delayed", "running", "suspended"]

# One action touches at most this many jobs: a plan a person can still be shown as counts, and
# an action that ends within one call. More: act in pages (see the module docstring).
MAX_BULK_JOBS = 1000
# since_seconds: a second at least, ten years at most (the tools publish this range).
SINCE_SECONDS = (1, MAX_DELAY_SECONDS)
# The plan shows this many jobs by id; the counts cover all.
SAMPLE_JOBS = 20
# The skip code of a job whose row changed between the plan and the action.
CHANGED = "CHANGED_SINCE_PLAN"


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
        default=None, description="CLI plan: the command that acts (a fresh plan, then --yes)"
    )


# A plan's jobs as they were: (id, updated_at).
Planned = list[tuple[str, int]]


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
    )
    jobs = found.jobs
    if not jobs:
        # A name or queue nothing knows is a typo, not a plan of nothing to confirm (as list_jobs).
        unknown = await unknown_filter(scope, wanted.name, wanted.queue, tenant)
        if unknown is not None:
            raise unknown
    plan = BulkPlan(
        action=action,
        at=at,
        states=list(states),
        matched=len(jobs),
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
    scope: Scope, action: BulkAction, planned: Sequence[tuple[str, int]], states: Sequence[str]
) -> BulkOutcome:
    """`action` on each planned job through the engine's per-job rules; a job that changed since
    the plan (a retry's row updated) or that the engine refuses now is skipped, with why."""
    tenant = scope.tenant(None)
    acted: list[str] = []
    skipped: list[BulkSkip] = []
    for job_id, updated_at in planned:
        try:
            if action == "retry":
                current = await scope.jobs.get(job_id, tenant_id=tenant)
                # A cancel keeps no such check: a queued job that started running since is
                # still the live job the person meant to stop.
                if current.updated_at != updated_at:
                    reason = f"now {current.state}, changed at {iso(current.updated_at)}"
                    skipped.append(BulkSkip(job_id=job_id, code=CHANGED, reason=reason))
                    continue
                await scope.jobs.retry(
                    job_id,
                    tenant_id=tenant,
                    include_cancelled="cancelled" in states,
                    actor=scope.actor,
                )
            else:
                await scope.jobs.cancel(job_id, tenant_id=tenant, actor=scope.actor)
        except JobsError as exc:
            skipped.append(BulkSkip(job_id=job_id, code=exc.code, reason=exc.cause))
            continue
        acted.append(job_id)
    return BulkOutcome(acted=len(acted), acted_ids=acted, skipped=skipped)


async def bulk_command(
    scope: Scope, action: BulkAction, wanted: BulkFilter, *, act: bool, words: Sequence[str]
) -> BulkJobsResult:
    """The CLI's `jobs retry-all|cancel-all`: the plan, and with `act` the action on that plan
    at once (the person at the terminal said --yes); without, the command that acts."""
    shown, planned = await plan_bulk(scope, action, wanted)
    given = wanted.given()
    if not act:
        command = scope.fixes.command(*words, "--yes")
        return BulkJobsResult(ok=True, mode="plan", filter=given, plan=shown, act_command=command)
    outcome = await act_bulk(scope, action, planned, shown.states)
    return BulkJobsResult(ok=True, mode="write", filter=given, plan=shown, outcome=outcome)


def summary(plan: BulkPlan) -> str:
    """The plan in one paragraph, as a person is asked to confirm it."""

    def counted(counts: dict[str, int]) -> str:
        items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{k or '-'} {n}" for k, n in items[:12])
        return shown + (f" and {len(items) - 12} more" if len(items) > 12 else "") or "none"

    text = f"{plan.action} {plan.matched} job(s) in state {'/'.join(plan.states)}"
    if plan.over_limit:
        text += f" (the newest {MAX_BULK_JOBS}; more match)"
    if plan.scan_capped:
        text += " (the read stopped short: more may match)"
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
