"""The confirmed writes of `run_backfill` and `prune_history`: each one's plan (what the person
is shown and a token binds to), its write, and its planning resolver for `server.confirm`."""

# No `from __future__ import annotations`: the SDK reads the resolvers' signatures.

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from engine.backfill.errors import BackfillRunningError
from engine.errors import JobsError
from engine.instants import iso
from mcp_jobs import operations
from mcp_jobs.operations.models import RunBackfillResult
from mcp_jobs.operations.prune import TOOL_MAX_BATCHES, PruneHistoryResult
from mcp_jobs.operations.scope import Scope
from mcp_jobs.server.calls import ToolContext, scope_for
from mcp_jobs.server.confirm import ConfirmedWrite, Plan, Planned, WriteGate, plan_write

# A message lists this many queues and cutoffs at most; the rest are counted.
SHOWN_ITEMS = 12

BackfillWrite = ConfirmedWrite[RunBackfillResult, RunBackfillResult]
PruneWrite = ConfirmedWrite[PruneHistoryResult, PruneHistoryResult]


def backfill_write(name: str, force: bool, wait_seconds: float) -> BackfillWrite:
    arguments = {"name": name, "force": force}

    async def plan(scope: Scope, at: int | None) -> tuple[RunBackfillResult, Plan]:
        model = await operations.run_backfill(scope, name, write=False, force=force)
        shown = model.plan
        assert shown is not None  # a dry run answers its plan
        keys = ", ".join(map(str, shown.sample_keys[:SHOWN_ITEMS])) or "none"
        summary = (
            f'backfill "{shown.name}" (checksum {shown.checksum}) sweeps {shown.rows_remaining} '
            f"row(s) in {shown.batches} batch(es) of {shown.batch_size}, across every tenant "
            f"(the app's own tables); first keys: {keys}."
        )
        if shown.blocked_by is not None and joins(shown.blocked_by.code):
            summary += " A pass of it is live: the write follows that pass and starts none."
        elif shown.blocked_by is not None:
            summary += f" The write would answer {shown.blocked_by.code}: {shown.blocked_by.cause}."
        content = shown.model_dump(mode="json")
        tenant = scope.settings.tenant
        return model, Plan("run_backfill", arguments, tenant, None, content, summary)

    async def write(scope: Scope, at: int | None) -> RunBackfillResult:
        return await operations.run_backfill(
            scope, name, write=True, force=force, wait_seconds=wait_seconds
        )

    def joins(code: str) -> bool:
        # A write that waits follows the live pass (operations.run_backfill), refused by none.
        return code == BackfillRunningError.code and wait_seconds > 0 and not force

    async def refusal(scope: Scope, model: RunBackfillResult) -> Exception | None:
        # Blocked (`would_run: false`): the refusal the write itself gives, read again now.
        if model.plan is None or model.plan.would_run:
            return None
        try:
            await scope.backfills().check_write(name, force)
        except JobsError as exc:
            return None if joins(exc.code) else exc
        return None

    return ConfirmedWrite(
        tool="run_backfill",
        arguments=arguments,
        dry_run_arguments={"name": name, **({"force": True} if force else {})},
        write_arguments={
            "name": name,
            "write": True,
            **({"force": True} if force else {}),
            **({"wait_seconds": wait_seconds} if wait_seconds else {}),
        },
        plan=plan,
        write=write,
        refusal=refusal,
    )


def prune_write(older_than_seconds: int | None, states: Sequence[str] | None) -> PruneWrite:
    arguments: dict[str, Any] = {"older_than_seconds": older_than_seconds, "states": states}
    given = {k: v for k, v in arguments.items() if v is not None}

    async def plan(scope: Scope, at: int | None) -> tuple[PruneHistoryResult, Plan]:
        model = await operations.prune_history(
            scope, write=False, older_than=older_than_seconds, states=states, at=at
        )
        assert model.at is not None and model.by_state is not None and model.by_queue is not None
        content = {
            "at": model.at,
            "cutoffs": [c.model_dump(mode="json") for c in model.cutoffs or []],
            "by_state": model.by_state,
            "by_queue": [q.model_dump(mode="json") for q in model.by_queue],
        }
        if model.audit_before is not None:
            content["audit_before"] = model.audit_before
            content["audit_events"] = model.audit_events
        summary = _prune_summary(model)
        tenant = scope.settings.tenant
        return model, Plan("prune_history", arguments, tenant, model.at, content, summary)

    async def write(scope: Scope, at: int | None) -> PruneHistoryResult:
        return await operations.prune_history(
            scope,
            write=True,
            older_than=older_than_seconds,
            states=states,
            max_batches=TOOL_MAX_BATCHES,
            at=at,
        )

    return ConfirmedWrite(
        tool="prune_history",
        arguments=arguments,
        dry_run_arguments=given,
        write_arguments={**given, "write": True},
        plan=plan,
        write=write,
        time_dependent=True,
        goes_on=lambda model: model.more is True,
    )


def _listed(items: list[str]) -> str:
    more = len(items) - SHOWN_ITEMS
    return ", ".join(items[:SHOWN_ITEMS]) + (f" and {more} more" if more > 0 else "")


def _prune_summary(model: PruneHistoryResult) -> str:
    by_state = model.by_state or {}
    total = sum(by_state.values())
    states = _listed([f"{state} {rows}" for state, rows in sorted(by_state.items())]) or "none"
    queues = _listed([f"{q.queue}/{q.state} {q.rows}" for q in model.by_queue or []]) or "none"
    cutoffs = _listed(
        [
            f"{c.state}{f' of {c.name}' if c.name else ''} finished before {iso(c.before)}"
            for c in model.cutoffs or []
        ]
    )
    audit = (
        ""
        if model.audit_before is None
        else f" and {model.audit_events} audit event(s) of no job recorded before "
        f"{iso(model.audit_before)}"
    )
    return (
        f"delete {total} settled job(s) with their steps and events{audit} (at most "
        f"{TOOL_MAX_BATCHES} batches this call); per state: {states}; per queue: {queues}; "
        f"cutoffs: {cutoffs or 'none'} (taken at {iso(model.at or 0)})."
    )


def backfill_planner(gate: WriteGate) -> Callable[..., Awaitable[Planned]]:
    async def plan_run_backfill(
        ctx: ToolContext, name: str, write: bool, force: bool, wait_seconds: float
    ) -> Planned:
        spec = backfill_write(name, force, wait_seconds)
        return await plan_write(ctx, scope_for(ctx, "run_backfill"), gate, spec, write)

    return plan_run_backfill


def prune_planner(gate: WriteGate) -> Callable[..., Awaitable[Planned]]:
    async def plan_prune_history(
        ctx: ToolContext,
        write: bool,
        older_than_seconds: int | None,
        states: list[str] | None,
    ) -> Planned:
        spec = prune_write(older_than_seconds, states)
        return await plan_write(ctx, scope_for(ctx, "prune_history"), gate, spec, write)

    return plan_prune_history
