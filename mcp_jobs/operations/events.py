"""`send_event` (engine/inbound_events.py): deliver an event to the jobs waiting for it.

The event belongs to a tenant: on a tenant-pinned server or CLI (`--tenant`) it is sent in the
pinned tenant (asking for another is TENANT_PINNED), so it only wakes and matches that tenant's
waits.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from engine.errors import InvalidArgumentError
from mcp_jobs.operations.event_waits import unawaited_notice
from mcp_jobs.operations.models import Envelope, Finding
from mcp_jobs.operations.scope import Scope

# What an event carries to the jobs waiting for it, as the `send_event` tool's schema declares
# it: named fields a job reads by name, so a sender can add one without breaking a waiting job.
EventPayload = dict[str, Any]
PAYLOAD_EXPECTED = "a JSON object"


class SendEventResult(Envelope):
    event_id: str | None = Field(default=None, description="the stored event's id")
    woken: int | None = Field(
        default=None, description="how many suspended jobs waiting for it were woken now"
    )
    tenant_id: str | None = Field(default=None, description="the tenant it was sent for")
    notices: list[Finding] | None = Field(
        default=None, description="EVENT_NOT_AWAITED: woke none; what jobs wait for instead"
    )


def checked_payload(payload: object, argument: str = "payload") -> EventPayload | None:
    """`payload` when it is an `EventPayload` or None (no payload); else INVALID_ARGUMENT. The
    rule of every face: the CLI's `--payload` and the tool's operation call it."""
    if payload is None or isinstance(payload, dict):
        return payload
    raise InvalidArgumentError(argument, payload, PAYLOAD_EXPECTED)


async def send_event(
    scope: Scope, name: str, key: str, payload: Any = None, tenant_id: str | None = None
) -> SendEventResult:
    tenant = scope.tenant(tenant_id)
    checked = checked_payload(payload)
    sent = await scope.jobs.send_event(name, key, checked, tenant_id=tenant)
    # Woke none: kept for a wait to come, but a slip in the name or key would leave the jobs
    # waiting for it asleep, unnoticed.
    notice = None if sent.woken else await unawaited_notice(scope, name, key, tenant, checked)
    return SendEventResult(
        ok=True,
        event_id=sent.event_id,
        woken=sent.woken,
        tenant_id=tenant,
        notices=[notice] if notice is not None else None,
    )
