"""Pruning settled history on demand (`prune_history`, `mcp-jobs db prune`).

A dry run (the default) answers the plan: what would go, per state and queue, and the cutoffs.
A write prunes in batches (engine.pruner) and answers what went, telling `scope.progress`
after each batch (batches done of `max_batches`). The policy is the one a worker
here would prune by (engine.retention: defaults, the environment, the jobs' own `retention=`),
each job's kept at least as long as the worker running it published (engine.pruner.in_force:
a prune by hand never deletes what that worker keeps), unless `older_than` replaces it for
this call. A tenant-pinned scope prunes only its tenant.

Events of no job (the audit of calls that named no job) go too, by the longest audit retention
declared here or published (`older_than` does not replace it), after the jobs; not in a call
scoped to a tenant or to some `states`, whose caller asked about jobs, not the audit trail.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, ClassVar

import anyio
from pydantic import BaseModel, ConfigDict, Field

from engine import bounds
from engine.descriptors import DESCRIPTOR_EXPIRY_MS, DescriptorInvalidError
from engine.drivers.base import DESCRIPTORS, HISTORY, require
from engine.errors import InvalidArgumentError
from engine.pruner import (
    between_batches,
    in_force,
    job_policies,
    merge,
    prune_all,
    worker_policy,
)
from engine.retention import (
    DEFAULT_BATCH_SIZE,
    Cutoffs,
    Policy,
    PruneCount,
    RetentionSettingInvalidError,
    audit_cutoff,
    parse_duration,
    plan,
    totals,
)
from mcp_jobs.operations.models import ConfirmOffer, Envelope, Finding, iso_of
from mcp_jobs.operations.scope import Scope
from schemas.states import SETTLED_STATES, JobState

if TYPE_CHECKING:
    from engine.client import Jobs

# One write call through the tool deletes at most this many batches; `more` says to call again.
TOOL_MAX_BATCHES = 20
# The command that starts the server an MCP client calls (qualified as every fix line is).
SERVE_COMMAND = "mcp-jobs serve"


class PrunedRows(BaseModel):
    state: JobState
    queue: str
    rows: int


class PruneCutoff(BaseModel):
    model_config = ConfigDict(json_schema_mode_override="serialization")  # with before_iso

    state: JobState
    before: int = Field(description="rows that finished before this time (epoch ms) go")
    before_iso: ClassVar[str] = iso_of("before")
    name: str | None = Field(
        default=None, description="only this job's rows (its own policy); null: every other job"
    )


class PruneHistoryResult(Envelope):
    mode: str | None = Field(default=None, description="'dry_run' or 'write'")
    at: int | None = Field(default=None, description="the instant the cutoffs were taken at")
    at_iso: ClassVar[str | None] = iso_of("at", optional=True)
    tenant_id: str | None = None
    cutoffs: list[PruneCutoff] | None = Field(
        default=None, description="per state (and job with a policy of its own): what goes"
    )
    by_queue: list[PrunedRows] | None = Field(
        default=None, description="rows that would go (dry run) or went (write), per queue"
    )
    by_state: dict[str, int] | None = Field(default=None, description="the same, per state")
    batches: int | None = None
    more: bool | None = Field(
        default=None,
        description="write: expired rows may remain; call again (confirm.next_call, when given) "
        "to go on",
    )
    audit_before: int | None = Field(
        default=None,
        description="audit events of no job recorded before this (epoch ms) go "
        "(MCP_JOBS_RETAIN_AUDIT); null: kept (tenant or states given, or forever)",
    )
    audit_before_iso: ClassVar[str | None] = iso_of("audit_before", optional=True)
    audit_events: int | None = Field(
        default=None, description="how many of them would go (dry run) or went"
    )
    unreadable_descriptor: str | None = Field(
        default=None,
        description="a job whose published descriptor cannot be read: the write forgets it and "
        "prunes nothing (`more`: call again)",
    )
    notices: list[Finding] | None = Field(
        default=None, description="SCOPE_MISSING: this access token may not make the write"
    )
    confirm: ConfirmOffer | None = Field(
        default=None,
        description="client without elicitation: the write's token (a dry run's; or, with more, "
        "one for the rest of the same plan)",
    )


def _states(states: Sequence[str] | None) -> list[JobState] | None:
    bounds.narrowing("states", states, "every settled state")
    if not states:
        return None
    chosen: list[JobState] = []
    for state in states:
        match = next((s for s in SETTLED_STATES if s == state), None)
        if match is None:
            raise InvalidArgumentError("state", state, f"one of {', '.join(SETTLED_STATES)}")
        chosen.append(match)
    return chosen


async def policies_for(
    scope: Scope, fields: Collection[str] | None = None
) -> tuple[Policy, dict[str, Policy]]:
    """The policies a prune from here applies: this process's, under what the workers published
    (engine.pruner.in_force), so it never deletes what the worker running a job keeps. Only
    `fields`' settings are read from the environment (None: all): those the call uses. Through
    MCP a bad one is the running server's, read at its start: its fix restarts the server."""
    try:
        policy = worker_policy(None, fields=fields)
    except RetentionSettingInvalidError as exc:
        raise (exc.restarted(SERVE_COMMAND) if scope.face == "mcp" else exc) from None
    own = job_policies(scope.jobs.registry, policy)
    driver = scope.jobs.driver
    published = (
        await require(driver, DESCRIPTORS).published_descriptors()
        if DESCRIPTORS.offered_by(driver)
        else []
    )
    return in_force(policy, own, published)


def cutoffs_for(
    policy: Policy,
    per_name: dict[str, Policy],
    now: int,
    older_than: str | float | None,
    states: Sequence[str] | None,
) -> Cutoffs:
    older_ms = None
    if older_than is not None:
        older_ms = parse_duration("older_than", older_than, forever=False)
    return plan(policy, now, per_name=per_name, states=_states(states), older_than_ms=older_ms)


async def prune_history(
    scope: Scope,
    *,
    write: bool = False,
    older_than: str | float | None = None,
    states: Sequence[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_batches: int | None = None,
    at: int | None = None,
    stop: anyio.Event | None = None,
) -> PruneHistoryResult:
    """`at` (epoch ms, default now) is the instant the cutoffs are taken at: a confirmed write
    passes its plan's, so it deletes what the person was shown and no row that expired since.
    `stop` set (the CLI's Ctrl-C) ends a write after the batch in hand: it answers what went,
    `more` true."""
    bounds.flag("write", write)
    bounds.whole("batch_size", batch_size, 1, 10_000)
    tenant = scope.tenant(None)
    history = require(scope.jobs.driver, HISTORY)
    now = scope.jobs.clock.now_ms() if at is None else at
    audited = tenant is None and not states  # a call about some states or a tenant keeps it
    # `older_than` replaces the states' policies: their settings are not read, nor refused.
    fields = None if older_than is None else (("audit",) if audited else ())
    try:
        policy, per_name = await policies_for(scope, fields)
    except DescriptorInvalidError as exc:
        return await _unreadable(scope, now, tenant, write, exc)
    cutoffs = cutoffs_for(policy, per_name, now, older_than, states)
    shown = [PruneCutoff(state=r.state, before=r.cutoff, name=r.name) for r in cutoffs.rules]
    audit_before = audit_cutoff(policy, now) if audited else None
    audit: dict[str, int] = {} if audit_before is None else {"audit_before": audit_before}
    if not write:
        counts = await history.prune_counts(cutoffs, tenant)
        if audit_before is not None:
            audit["audit_events"] = await history.count_jobless_events(audit_before)
        return _result("dry_run", now, tenant, shown, counts).model_copy(update=audit)
    counts, batches, more = await _write(scope, cutoffs, batch_size, tenant, max_batches, stop)
    if audit_before is not None and not more:
        left = None if max_batches is None else max_batches - batches
        gone, more = await _forget_audit(scope.jobs, audit_before, batch_size, left)
        audit["audit_events"] = gone
    result = _result("write", now, tenant, shown, counts)
    return result.model_copy(update={"batches": batches, "more": more, **audit})


async def _unreadable(
    scope: Scope, now: int, tenant: str | None, write: bool, exc: DescriptorInvalidError
) -> PruneHistoryResult:
    """What the worker's pruner does on a pass that meets a descriptor it cannot read (engine.
    pruner): forget it (with those expired), delete no history, and say to go on; a dry run
    says so and writes nothing."""
    if write:
        store = require(scope.jobs.driver, DESCRIPTORS)
        await store.forget_descriptors(now - DESCRIPTOR_EXPIRY_MS)
    result = _result("write" if write else "dry_run", now, tenant, [], [])
    job = (exc.details or {}).get("job")
    return result.model_copy(update={"unreadable_descriptor": job, "more": True})


async def _forget_audit(
    jobs: Jobs, before: int, batch_size: int, max_batches: int | None
) -> tuple[int, bool]:
    """Audit events of no job recorded before `before`, in batches after the jobs' (within
    what is left of `max_batches`, at least one), pausing between them as the jobs' batches do
    (engine.pruner.between_batches); answers how many went and whether more may remain."""
    history = require(jobs.driver, HISTORY)
    gone, batches = 0, 0
    while max_batches is None or batches < max(1, max_batches):
        started = jobs.clock.now_ms()
        got = await history.forget_jobless_events(before, batch_size)
        took = jobs.clock.now_ms() - started
        gone, batches = gone + got, batches + 1
        if got < batch_size:
            return gone, False
        await between_batches(jobs, took)
    return gone, True


async def _write(
    scope: Scope,
    cutoffs: Cutoffs,
    batch_size: int,
    tenant: str | None,
    max_batches: int | None,
    stop: anyio.Event | None = None,
) -> tuple[list[PruneCount], int, bool]:
    """`prune_all` one batch at a time, so each batch is reported as progress; `stop` set ends
    it between batches (what went so far is answered, `more` true)."""
    counts: list[PruneCount] = []
    batches, more = 0, True
    while more and (max_batches is None or batches < max_batches):
        if stop is not None and stop.is_set():
            break
        got, _, more = await prune_all(
            scope.jobs, cutoffs, batch_size=batch_size, tenant_id=tenant, max_batches=1
        )
        batches += 1
        counts = merge(counts, got)
        rows = sum(c.rows for c in counts)
        total = None if max_batches is None else float(max_batches)
        await scope.progress(float(batches), total, f"batch {batches}: {rows} rows pruned")
        await anyio.lowlevel.checkpoint()  # as prune_all does: a drain's writes go between
    return counts, batches, more


def _result(
    mode: str, now: int, tenant: str | None, shown: list[PruneCutoff], counts: list[PruneCount]
) -> PruneHistoryResult:
    return PruneHistoryResult(
        ok=True,
        mode=mode,
        at=now,
        tenant_id=tenant,
        cutoffs=shown,
        by_queue=[PrunedRows(state=c.state, queue=c.queue, rows=c.rows) for c in counts],
        by_state=totals(counts),
    )
