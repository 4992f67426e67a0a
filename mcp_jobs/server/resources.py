"""Read-only resources: descriptors, one run, backfills, stats — JSON an agent can attach.

A missing descriptor or run, or a URI naming none (`jobs://runs/`), is JSON-RPC -32602 with the
typed payload (code, cause, fix) in `data`, as resources/subscribe answers: never an empty body,
never -32603 (a server fault).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

from engine.errors import InvalidArgumentError, JobsError
from mcp_jobs import operations
from mcp_jobs.operations.scope import Scope
from mcp_jobs.server.served import request_scope
from mcp_jobs.server.state import AppState, StateHolder
from mcp_jobs.server.uri_errors import uri_refusal

JSON = "application/json"
ENVELOPE_FIELDS = {"ok", "error"}


def _plain(value: Any) -> Any:
    """As the tools answer: no envelope fields, no nulls."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude=ENVELOPE_FIELDS, exclude_none=True)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _dump(value: Any) -> str:
    return json.dumps(_plain(value), ensure_ascii=False, indent=2)


async def _read(holder: StateHolder, uri: str, read: Callable[[Scope], Awaitable[Any]]) -> str:
    state = holder.require()
    scope = request_scope(state, uri)
    try:
        return _dump(await read(scope))
    except JobsError as exc:
        if isinstance(exc, InvalidArgumentError) and exc.fix_said:
            # A fix that only says what to pass (a job id that is empty or too long): the line
            # that lists what there is to name, as the CLI's fallback.
            exc.fix = scope.fixes.listing("jobs", exc.argument) or exc.fix
        raise uri_refusal(exc, "resources/read", uri, scope) from exc


def register(server: MCPServer[AppState], holder: StateHolder) -> None:
    @server.resource(
        "jobs://descriptors",
        name="descriptors",
        title="Job descriptors",
        description=(
            "Every job this server can enqueue: queue, input schema, retry policy, timeout, "
            "tenancy; registered here or published by a worker (source, stale)."
        ),
        mime_type=JSON,
    )
    async def descriptors() -> str:
        async def read(scope: Scope) -> Any:
            return (await operations.describe_jobs(scope)).jobs

        return await _read(holder, "jobs://descriptors", read)

    @server.resource(
        "jobs://descriptors/{name}",
        name="descriptor",
        title="One job's descriptor",
        description="One job's descriptor, by name (registered here or published by a worker).",
        mime_type=JSON,
    )
    async def descriptor(name: str) -> str:
        async def read(scope: Scope) -> Any:
            found = (await operations.describe_jobs(scope, name)).jobs
            return found[0] if found else None  # describe_jobs refuses a name it lacks

        return await _read(holder, f"jobs://descriptors/{name}", read)

    @server.resource(
        "jobs://runs/{job_id}",
        name="run",
        title="One job's run",
        description="A job's record, steps, events, lease and retry schedule (as inspect_job).",
        mime_type=JSON,
    )
    async def run(job_id: str) -> str:
        return await _read(
            holder, f"jobs://runs/{job_id}", lambda s: operations.inspect_job(s, job_id)
        )

    @server.resource(
        "jobs://backfills",
        name="backfills",
        title="Backfills",
        description="Declared backfills with their ledger state in this environment.",
        mime_type=JSON,
    )
    async def backfills() -> str:
        return await _read(holder, "jobs://backfills", operations.list_backfills)

    @server.resource(
        "jobs://stats",
        name="stats",
        title="Queue statistics",
        description="Per-queue counts, oldest ready age, expired leases, overdue suspensions.",
        mime_type=JSON,
    )
    async def stats() -> str:
        return await _read(holder, "jobs://stats", lambda s: operations.queue_stats(s))
