"""The confirmed bulk writes `retry_jobs` and `cancel_jobs`: a plan, then an action on exactly
the jobs it listed (`mcp_jobs.operations.bulk`), confirmed the way `server.confirm` confirms
run_backfill and prune_history.

The difference from those: a bulk write does not plan again and compare before acting (a job
retried by someone in between would void the whole action). It acts on the plan's own job ids,
and skips a job that changed. So the ids must travel from the plan to the write: in the question
a person answered (elicitation), or, for a token, in this server's `PlanBook` under the plan's
digest the token is bound to — in-process, like the tokens themselves (a restart voids both).
"""

# No `from __future__ import annotations`: the SDK reads the tools' and resolvers' signatures.

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer, Resolve
from mcp.server.mcpserver.resolve import (
    AcceptedElicitation,
    CancelledElicitation,
    DeclinedElicitation,
    ElicitationResult,
)
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from engine.bounds import MAX_NAME_BYTES, MAX_TENANT_BYTES
from mcp_jobs.errors import (
    ConfirmationInvalidError,
    ConfirmationRequiredError,
    WriteDeclinedError,
)
from mcp_jobs.operations.bulk import (
    MAX_BULK_JOBS,
    SINCE_SECONDS,
    BulkAction,
    BulkFilter,
    BulkJobsResult,
    BulkPlan,
    BulkRun,
    act_bulk,
    plan_bulk,
    plan_notices,
    summary,
)
from mcp_jobs.operations.models import ConfirmOffer
from mcp_jobs.operations.scope import Scope
from mcp_jobs.server.calls import ToolContext, run_tool, scope_for
from mcp_jobs.server.confirm import (
    ConfirmedWrite,
    ConfirmWrite,
    Plan,
    Planned,
    WriteGate,
    asker,
    call_key,
    can_elicit,
    cannot_act,
    noticed,
    plan_write,
)
from mcp_jobs.server.oauth_grants import request_settings, scope_refusal
from mcp_jobs.server.state import AppState
from schemas.states import CancelState, RetryState

BulkWrite = ConfirmedWrite[BulkJobsResult, BulkJobsResult]


@dataclass
class PlanBook:
    """The plans this server handed a token for, by digest, until the token expires."""

    _plans: dict[str, tuple[dict[str, Any], int]] = field(default_factory=dict)

    def keep(self, plan: Plan, expires: int) -> None:
        self._plans[plan.digest] = (dict(plan.content), expires)

    def get(self, digest: str, now: int) -> dict[str, Any] | None:
        for key in [k for k, (_, exp) in self._plans.items() if exp <= now]:
            del self._plans[key]
        kept = self._plans.get(digest)
        return None if kept is None else kept[0]


def bulk_write(action: BulkAction, wanted: BulkFilter, run: BulkRun) -> BulkWrite:
    tool = f"{action}_jobs"
    arguments = wanted.model_dump()
    given = wanted.given()

    async def plan(scope: Scope, at: int | None) -> tuple[BulkJobsResult, Plan]:
        shown, planned = await plan_bulk(scope, action, wanted, at)
        notices = await plan_notices(scope, wanted, shown) or None
        model = BulkJobsResult(ok=True, mode="plan", filter=given, plan=shown, notices=notices)
        content = {"plan": shown.model_dump(mode="json"), "jobs": planned}
        tenant = scope.settings.tenant
        return model, Plan(tool, arguments, tenant, shown.at, content, summary(shown))

    async def write(scope: Scope, at: int | None) -> BulkJobsResult:
        _, shown = await plan(scope, at)
        return await _act(scope, action, given, dict(shown.content), run)

    return ConfirmedWrite(
        tool=tool,
        arguments=arguments,
        dry_run_arguments=given,
        write_arguments={**given, "write": True},
        plan=plan,
        write=write,
        # since_seconds counts back from the plan's instant: a question asked over several
        # rounds keeps its first instant, so it stays one question.
        time_dependent=True,
    )


async def _act(
    scope: Scope, action: BulkAction, given: dict[str, Any], content: dict[str, Any], run: BulkRun
) -> BulkJobsResult:
    shown = BulkPlan.model_validate(content["plan"])
    planned = [(job_id, updated_at) for job_id, updated_at in content["jobs"]]
    outcome = await act_bulk(scope, action, shown, planned, given, run)
    return BulkJobsResult(ok=True, mode="write", filter=given, plan=shown, outcome=outcome)


async def bulk_guarded(
    scope: Scope,
    gate: WriteGate,
    book: PlanBook,
    spec: BulkWrite,
    action: BulkAction,
    planned: Planned,
    answer: ElicitationResult[ConfirmWrite],
    token: str | None,
    offer: bool,
    run: BulkRun,
) -> BulkJobsResult:
    """A plan (with a token offered when `offer`), or the action on a plan the person
    confirmed (asked, or by its token), or the typed refusal."""
    now = scope.jobs.clock.now_ms()
    ttl_ms = int(scope.settings.confirm_ttl_seconds * 1000)
    given = dict(spec.dry_run_arguments)
    if planned.mode == "unconfirmed":
        return await spec.write(scope, None)
    if planned.mode == "elicit":
        if planned.error is not None:
            raise planned.error
        assert planned.plan is not None
        gate.unpin(planned.plan.key)
        if isinstance(answer, DeclinedElicitation | CancelledElicitation):
            raise WriteDeclinedError(spec.tool, answer.action, spec.dry_run_call())
        assert isinstance(answer, AcceptedElicitation)
        if not answer.data.confirm:
            raise WriteDeclinedError(spec.tool, "no", spec.dry_run_call())
        return await _act(scope, action, given, dict(planned.plan.content), run)
    if planned.mode == "token" and token is not None:
        key = call_key(spec.tool, spec.arguments, scope.settings.tenant)
        try:
            claims, why = gate.check(token, key, now)
        except (ValueError, KeyError, TypeError):
            claims, why = None, "is not a confirm token"
        content = None if claims is None else book.get(claims.plan, now)
        if claims is not None and content is None:
            why = "was for a plan this server no longer holds"
        if content is None:
            raise ConfirmationInvalidError(spec.tool, why, spec.dry_run_call())
        # Spent before acting: a token acts once, even on an action cut short (its replay is
        # refused with the plan call, which plans what still matches).
        gate.spend(token, now)
        return await _act(scope, action, given, content, run)
    model, plan = await spec.plan(scope, None)
    if planned.mode == "dry_run":
        # A token the caller's access token may not act with is not offered: it says why.
        lacking = scope_refusal(scope.settings, spec.tool, mutating=True)
        if lacking is not None:
            return noticed(model, cannot_act(lacking))
        if not offer:
            return model
    issued, expires = gate.issue(plan, now, ttl_ms)
    book.keep(plan, expires)
    if planned.mode == "token":  # a write without its token: the plan, and the token to act
        shown = {"summary": plan.summary, "tenant": plan.tenant, **plan.content["plan"]}
        raise ConfirmationRequiredError(spec.tool, spec.write_call(issued), shown, expires)
    confirm = ConfirmOffer(token=issued, expires_at=expires, next_call=spec.write_call(issued))
    return model.model_copy(update={"confirm": confirm})


def _planner(
    gate: WriteGate, action: BulkAction, state_type: Any
) -> Callable[..., Awaitable[Planned]]:
    async def plan_bulk_write(
        ctx: ToolContext,
        write: bool,
        name: str | None,
        queue: str | None,
        tenant_id: str | None,
        states: list[state_type] | None,
        error_code: str | None,
        since_seconds: int | None,
    ) -> Planned:
        wanted = BulkFilter(
            name=name,
            queue=queue,
            tenant_id=tenant_id,
            states=states,
            error_code=error_code,
            since_seconds=since_seconds,
        )
        spec = bulk_write(action, wanted, BulkRun())
        scope = scope_for(ctx, spec.tool)
        lacking = scope_refusal(scope.settings, spec.tool, mutating=True) if write else None
        if lacking is not None:  # refused by the call itself: nobody is asked about it
            return Planned(mode="elicit", error=lacking)
        return await plan_write(ctx, scope, gate, spec, write)

    plan_bulk_write.__name__ = f"plan_{action}_jobs"
    return plan_bulk_write


Name = Annotated[str | None, Field(description="only this job name", max_length=MAX_NAME_BYTES)]
Queue = Annotated[str | None, Field(description="only this queue", max_length=MAX_NAME_BYTES)]
Tenant = Annotated[
    str | None, Field(description="only this tenant's jobs", max_length=MAX_TENANT_BYTES)
]
ErrorCode = Annotated[
    str | None,
    Field(description="only jobs whose stored last_error.code is this", max_length=MAX_NAME_BYTES),
]
Since = Annotated[
    int | None,
    Field(description="only jobs last changed this many seconds ago or less",
          ge=SINCE_SECONDS[0], le=SINCE_SECONDS[1]),
]  # fmt: skip
Write = Annotated[bool, Field(description="act on the plan")]
Token = Annotated[
    str | None, Field(description="with write: the plan's confirm.token", max_length=1024)
]


def register(server: MCPServer[AppState], gate: WriteGate) -> None:
    """`retry_jobs` and `cancel_jobs` (mutating: never on a read-only server)."""
    book = PlanBook()
    plan_retry = _planner(gate, "retry", RetryState)
    ask_retry = asker(plan_retry)
    plan_cancel = _planner(gate, "cancel", CancelState)
    ask_cancel = asker(plan_cancel)

    def offers(ctx: ToolContext, scope: Scope) -> bool:
        return scope.settings.confirm_writes and not can_elicit(ctx)

    def call(
        ctx: ToolContext,
        action: BulkAction,
        wanted: BulkFilter,
        planned: Planned,
        answer: ElicitationResult[ConfirmWrite],
        write: bool,
        confirm: str | None,
    ) -> Awaitable[CallToolResult]:
        run = BulkRun()
        spec = bulk_write(action, wanted, run)
        # A write that acts records its own event, with the counts, however it ends
        # (`operations.bulk`); one refused before acting is recorded here.
        audit: dict[str, Any] | None = {**wanted.given(), "write": True} if write else None

        async def operation(scope: Scope) -> BulkJobsResult:
            offer = offers(ctx, scope)
            return await bulk_guarded(
                scope, gate, book, spec, action, planned, answer, confirm, offer, run
            )

        return run_tool(
            ctx,
            spec.tool,
            operation,
            audit=audit,
            audited=lambda: run.recorded,
            subject=lambda m: (None, scope_tenant(ctx)),
        )

    def scope_tenant(ctx: ToolContext) -> str | None:
        # The request's tenant: an OAuth token's claim pins it as --tenant does.
        return request_settings(ctx.request_context.lifespan_context.settings).tenant

    described = (
        f"By default a PLAN (counts per name/queue/tenant/error code, a sample of ids; at most "
        f"{MAX_BULK_JOBS} jobs, over_limit when more match: act, then plan again); write=true "
        "acts on exactly the planned jobs once the person confirms (else with the plan's "
        "confirm.token: issue its next_call). A planned job that changed since is skipped and "
        "listed. A tenant-pinned server acts in its tenant only. Errors: INVALID_ARGUMENT, "
        "TENANT_PINNED, WRITE_DECLINED, CONFIRMATION_REQUIRED, CONFIRMATION_INVALID."
    )

    @server.tool(
        name="retry_jobs",
        title="Retry jobs by filter",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
        description="Requeue every failed, dead (or, asked, delayed) job a filter matches, as "
        "retry_job does. " + described,
    )
    async def retry_jobs_tool(
        ctx: ToolContext,
        planned: Annotated[Planned, Resolve(plan_retry)],
        answer: Annotated[ElicitationResult[ConfirmWrite], Resolve(ask_retry)],
        name: Name = None,
        queue: Queue = None,
        tenant_id: Tenant = None,
        states: Annotated[
            list[RetryState] | None,
            Field(
                description="default failed and dead; also cancelled, delayed",
                max_length=4,
            ),
        ] = None,
        error_code: ErrorCode = None,
        since_seconds: Since = None,
        write: Write = False,
        confirm: Token = None,
    ) -> Annotated[CallToolResult, BulkJobsResult]:
        wanted = BulkFilter(
            name=name,
            queue=queue,
            tenant_id=tenant_id,
            states=None if states is None else list(states),
            error_code=error_code,
            since_seconds=since_seconds,
        )
        return await call(ctx, "retry", wanted, planned, answer, write, confirm)

    @server.tool(
        name="cancel_jobs",
        title="Cancel jobs by filter",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
        description="Cancel every live job a filter matches (as cancel_job does). " + described,
    )
    async def cancel_jobs_tool(
        ctx: ToolContext,
        planned: Annotated[Planned, Resolve(plan_cancel)],
        answer: Annotated[ElicitationResult[ConfirmWrite], Resolve(ask_cancel)],
        name: Name = None,
        queue: Queue = None,
        tenant_id: Tenant = None,
        states: Annotated[
            list[CancelState] | None,
            Field(description="default every live state", max_length=4),
        ] = None,
        error_code: ErrorCode = None,
        since_seconds: Since = None,
        write: Write = False,
        confirm: Token = None,
    ) -> Annotated[CallToolResult, BulkJobsResult]:
        wanted = BulkFilter(
            name=name,
            queue=queue,
            tenant_id=tenant_id,
            states=None if states is None else list(states),
            error_code=error_code,
            since_seconds=since_seconds,
        )
        return await call(ctx, "cancel", wanted, planned, answer, write, confirm)
