"""What every tool call goes through: its Scope, the operation, the envelope, the audit event."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent
from pydantic_core import to_json

from engine.call_retries import one_call
from mcp_jobs.operations.envelope import error_payload, failure, success
from mcp_jobs.operations.models import Envelope
from mcp_jobs.operations.scope import Scope
from mcp_jobs.server.audit import Subject, record_call
from mcp_jobs.server.engine_refusal import mended
from mcp_jobs.server.oauth_grants import authorize
from mcp_jobs.server.served import request_scope
from mcp_jobs.server.state import AppState
from mcp_jobs.server.trace_context import request_traceparent

M = TypeVar("M", bound=Envelope)

ToolContext = Context[AppState, Any]


def scope_for(ctx: ToolContext, tool: str) -> Scope:
    return request_scope(
        ctx.request_context.lifespan_context,
        tool,
        progress=ctx.report_progress,
        traceparent=request_traceparent(ctx.request_context.meta),
    )


async def run_tool(
    ctx: ToolContext,
    tool: str,
    operation: Callable[[Scope], Awaitable[M]],
    *,
    audit: dict[str, Any] | None = None,
    subject: Callable[[M], Subject] | None = None,
    audited: Callable[[], bool] | None = None,
) -> CallToolResult:
    """Run `operation` and shape its result or failure as this tool's envelope.

    `audit` marks a mutating call: it is recorded as an event (tool, job, tenant, time, actor
    `mcp:<tool>`) whether it succeeded or was refused, so the events table answers "who did
    that" for every change an agent attempted. `audited` says the operation wrote that event
    itself (a bulk action records its own, with its counts, even when cut short).
    The operation and its audit event retry through an outage for one retry deadline in all
    (engine/call_retries.py), not one each.
    """
    scope = scope_for(ctx, tool)
    acted_on: Subject = (None, None)
    with one_call():
        try:
            authorize(scope.settings, tool, mutating=audit is not None)  # OAuth scopes
            model = await operation(scope)
            # Every fix inside the answer (findings, notices, a job's last error) runs as given.
            envelope = success(scope.fixes.qualify_all(model))
            if subject is not None:
                acted_on = subject(model)
        except Exception as exc:  # the envelope is the error channel; cancellation propagates
            # An argument the engine refused comes back as the caller's call, mended.
            where = f"tool {tool}"
            envelope = failure(error_payload(mended(exc), where=where, context=scope.fixes))
        if audit is not None and not (audited is not None and audited()):
            await record_call(scope, tool, envelope, acted_on, audit)
    return tool_result(envelope)


def as_text(envelope: dict[str, Any]) -> str:
    # Compact UTF-8 JSON, as json.dumps(ensure_ascii=False) writes it, in a quarter of the time.
    return to_json(envelope).decode()


def tool_result(envelope: dict[str, Any]) -> CallToolResult:
    """The same JSON twice: structured for clients that read `structuredContent`, text for the
    ones that only show content blocks."""
    return CallToolResult(
        is_error=not envelope["ok"],
        structured_content=envelope,
        content=[TextContent(type="text", text=as_text(envelope))],
    )


def tool_failure(exc: BaseException, tool: str, ctx: ToolContext | None) -> CallToolResult:
    """`exc` as `tool`'s failure before it ran; with `ctx`, its command fixes are written to run
    as given (the database, the app), as the tool's own refusals are."""
    context = scope_for(ctx, tool).fixes if ctx is not None else None
    return tool_result(failure(error_payload(exc, where=f"tool {tool}", context=context)))


async def declined_before_run(
    ctx: ToolContext | None, tool: str, declined: Exception, arguments: dict[str, Any]
) -> CallToolResult:
    """A write declined before its body ran (its confirm question got no yes or no): answered
    and recorded in the audit trail as the body's own decline would be."""
    envelope = failure(error_payload(declined, where=f"tool {tool}"))
    if ctx is not None:
        await record_call(scope_for(ctx, tool), tool, envelope, (None, None), arguments)
    return tool_result(envelope)
