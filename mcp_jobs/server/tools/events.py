"""The event tool (engine/inbound_events.py): `send_event`, mutating and audited.

Registered by the app only when the server is not read-only. Not idempotent: each call stores
a new event (a later wait in a run may receive the second one); not destructive.
"""

# No `from __future__ import annotations`: the SDK reads each tool's signature at registration.

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from engine.bounds import MAX_KEY_BYTES, MAX_NAME_BYTES, MAX_TENANT_BYTES
from mcp_jobs.operations.events import EventPayload, SendEventResult, send_event
from mcp_jobs.server.calls import ToolContext, run_tool
from mcp_jobs.server.state import AppState

_ANNOTATIONS = ToolAnnotations(
    read_only_hint=False,
    destructive_hint=False,
    idempotent_hint=False,
    open_world_hint=False,
)


def register(server: MCPServer[AppState]) -> None:
    @server.tool(
        name="send_event",
        title="Send an event to waiting jobs",
        annotations=_ANNOTATIONS,
        description=(
            "Store the event (name, key) and wake every job waiting for it in "
            "ctx.step.wait_for_event (every one: events are not consumed). Kept for the event "
            "window (24 h by default), so a job that waits later still receives it. Answers "
            "event_id and woken. Errors: INVALID_ARGUMENT, TENANT_PINNED."
        ),
    )
    async def send_event_tool(
        ctx: ToolContext,
        name: Annotated[
            str, Field(description="the event name a job waits for", max_length=MAX_NAME_BYTES)
        ],
        key: Annotated[
            str,
            Field(
                description="the key it matches (wait_for_event's match)", max_length=MAX_KEY_BYTES
            ),
        ],
        payload: Annotated[
            EventPayload | None,
            Field(description="a JSON object the waiting jobs receive (64 KiB at most)"),
        ] = None,
        tenant_id: Annotated[
            str | None,
            Field(description="the tenant whose jobs it reaches", max_length=MAX_TENANT_BYTES),
        ] = None,
    ) -> Annotated[CallToolResult, SendEventResult]:
        return await run_tool(
            ctx,
            "send_event",
            lambda s: send_event(s, name, key, payload, tenant_id),
            audit={"name": name, "key": key, "tenant_id": tenant_id},
            subject=lambda m: (None, m.tenant_id),
        )
