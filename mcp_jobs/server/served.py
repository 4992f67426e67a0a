"""Which tools a request can call, and the Scope an MCP request runs an operation in.

A fix's `next_call` is a call the agent may issue as is, so it names only a tool this request
can call: a read-only server registers no mutating tool, and an OAuth token without `jobs:write`
does not see the tools that only change state. The fix line itself stays: a command the person
can run with their own rights.
"""

from __future__ import annotations

from mcp_jobs.config import Settings
from mcp_jobs.operations.scope import Progress, Scope
from mcp_jobs.server.oauth_grants import hidden_by_grant, request_settings
from mcp_jobs.server.state import AppState

MUTATING_TOOLS = (
    "enqueue_job",
    "retry_job",
    "cancel_job",
    "run_backfill",
    "prune_history",
    "retry_jobs",
    "cancel_jobs",
    "pause_queue",
    "resume_queue",
    "send_event",
)
READ_TOOLS = (
    "describe_jobs",
    "list_jobs",
    "inspect_job",
    "queue_stats",
    "diagnose_queue",
    "database_report",
    "wait_for_job",
    "list_backfills",
)


def unserved_tools(settings: Settings) -> frozenset[str]:
    """The tools this request cannot call (`settings` as the request sees them)."""
    unregistered = frozenset(MUTATING_TOOLS) if settings.read_only else frozenset()
    return unregistered | hidden_by_grant()


def request_scope(
    state: AppState,
    tool: str,
    *,
    progress: Progress | None = None,
    traceparent: str | None = None,
) -> Scope:
    """The Scope of an MCP request for `tool` (a tool, a resource URI, a method): pinned to an
    OAuth token's tenant claim, its fix lines naming only tools this request can call."""
    settings = request_settings(state.settings)
    scope = Scope(
        jobs=state.jobs,
        settings=settings,
        tool=tool,
        actor=f"mcp:{tool}",
        backfill_registry=state.backfills,
        face="mcp",
        traceparent=traceparent,
        unserved=unserved_tools(settings),
    )
    if progress is not None:
        scope.progress = progress
    return scope
