"""What every tool call goes through: the app state, a Scope, the envelope, the audit event."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult

from engine.backfill import BackfillRegistry
from engine.client import Jobs, connect
from engine.errors import JobsError, short_repr
from engine.storable import find_unstorable
from mcp_jobs.config import Scope, Settings
from mcp_jobs.envelope import error_payload, failure, success, tool_result
from mcp_jobs.models import Envelope

logger = logging.getLogger("mcp_jobs.server")

M = TypeVar("M", bound=Envelope)

AUDIT_EVENT = "mcp.call"
# How much of one argument an audit event keeps: a refused call with a 5 MB id must not add 5 MB
# to the events table. The audited arguments are a fixed few per tool, so the event is bounded.
AUDIT_VALUE_CHARS = 200


@dataclass
class AppState:
    """The lifespan context every handler reads: one jobs client and the settings."""

    jobs: Jobs
    settings: Settings
    backfills: BackfillRegistry | None = None


class StateHolder:
    """The running server's state, for handlers the SDK gives no Context (static resources)."""

    def __init__(self) -> None:
        self.state: AppState | None = None

    def require(self) -> AppState:
        if self.state is None:
            raise RuntimeError("the server is not running (its lifespan has not started)")
        return self.state


def lifespan_for(
    settings: Settings,
    jobs: Jobs | None,
    holder: StateHolder,
    backfills: BackfillRegistry | None = None,
) -> Callable[[MCPServer[AppState]], AbstractAsyncContextManager[AppState]]:
    """A given client is borrowed (its owner closes it); otherwise one is opened on the first
    session and closed when the last one ends, so HTTP sessions share one pool."""
    users = 0
    opened: Jobs | None = None
    lock = anyio.Lock()

    @asynccontextmanager
    async def lifespan(_: MCPServer[AppState]) -> AsyncIterator[AppState]:
        nonlocal users, opened
        async with lock:
            if jobs is None and opened is None:
                opened = await connect(settings.url)
        client = jobs if jobs is not None else opened
        assert client is not None
        users += 1
        holder.state = AppState(jobs=client, settings=settings, backfills=backfills)
        try:
            yield holder.state
        finally:
            users -= 1
            if users == 0 and opened is not None:
                closing, opened = opened, None
                holder.state = None
                with anyio.CancelScope(shield=True):
                    await closing.close()

    return lifespan


ToolContext = Context[AppState, Any]


def scope_for(ctx: ToolContext, tool: str) -> Scope:
    state = ctx.request_context.lifespan_context
    return Scope(
        jobs=state.jobs,
        settings=state.settings,
        tool=tool,
        actor=f"mcp:{tool}",
        progress=ctx.report_progress,
        backfill_registry=state.backfills,
    )


# What an audited call acted on: (job id, tenant), when known from its result.
Subject = tuple[str | None, str | None]


async def run_tool(
    ctx: ToolContext,
    tool: str,
    operation: Callable[[Scope], Awaitable[M]],
    *,
    audit: dict[str, Any] | None = None,
    subject: Callable[[M], Subject] | None = None,
) -> CallToolResult:
    """Run `operation` and shape its result or failure as this tool's envelope.

    `audit` marks a mutating call: it is recorded as an event (tool, job, tenant, time, actor
    `mcp:<tool>`) whether it succeeded or was refused, so the events table answers "who did
    that" for every change an agent attempted.
    """
    scope = scope_for(ctx, tool)
    acted_on: Subject = (None, None)
    try:
        model = await operation(scope)
        envelope = success(model)
        if subject is not None:
            acted_on = subject(model)
    except Exception as exc:  # the envelope is the error channel; cancellation still propagates
        envelope = failure(error_payload(exc, where=f"tool {tool}"))
    if audit is not None:
        await _record(scope, tool, envelope, acted_on, audit)
    return tool_result(envelope)


def audit_value(value: Any) -> Any:
    """One argument as the audit keeps it: short storable values as they are, anything else
    (too long, a NUL, a lone surrogate, NaN) as a cut `repr` with a marker."""
    if value is None or isinstance(value, bool | int):
        return value
    short = not isinstance(value, str) or len(value) <= AUDIT_VALUE_CHARS
    if isinstance(value, float | str) and short and find_unstorable(value) is None:
        return value
    return short_repr(value, AUDIT_VALUE_CHARS)


# Refusals that mean "no such job here" or "that is not a job id": attaching the call to that id
# could write into a job the caller may not see (another tenant's), so it is recorded without one.
_UNSEEN = frozenset(
    {
        "JOB_NOT_FOUND",
        "TENANT_PINNED",
        "TOOL_ARGUMENTS_INVALID",
        "INVALID_ARGUMENT",
        "LIMIT_EXCEEDED",
        "INTERNAL",
    }
)


async def _record(
    scope: Scope, tool: str, envelope: dict[str, Any], acted_on: Subject, audit: dict[str, Any]
) -> None:
    job_id, tenant = acted_on
    error = envelope.get("error") or {}
    arguments = {key: audit_value(value) for key, value in audit.items()}
    data: dict[str, Any] = {"tool": tool, "ok": envelope["ok"], "arguments": arguments}
    # The tenant the caller asked for tags the event only when it was kept as given.
    asked_tenant = audit.get("tenant_id")
    if arguments.get("tenant_id") != asked_tenant:
        asked_tenant = None
    try:
        if error:
            data["error_code"] = error.get("code")
            asked = audit.get("job_id")
            if asked and arguments.get("job_id") == asked and error.get("code") not in _UNSEEN:
                # Refused on a job the caller can see (e.g. already settled): record it there.
                try:
                    record = await scope.jobs.get(asked, tenant_id=scope.settings.tenant)
                except JobsError:
                    pass  # gone or unreadable: the call is still recorded, without a job
                else:
                    job_id, tenant = record.id, record.tenant_id
        await scope.jobs.record_event(
            AUDIT_EVENT,
            job_id=job_id,
            actor=scope.actor,
            tenant_id=tenant or scope.settings.tenant or asked_tenant,
            data=data,
        )
    except Exception:
        # The change itself is done (or refused); losing its audit line must not change the
        # answer the caller gets.
        logger.exception("audit event for %s not recorded", tool)
