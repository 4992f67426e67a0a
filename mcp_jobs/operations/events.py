"""`send_event` (engine/inbound_events.py): deliver an event to the jobs waiting for it.

The event belongs to a tenant: on a tenant-pinned server or CLI (`--tenant`) it is sent in the
pinned tenant (asking for another is TENANT_PINNED), so it only wakes and matches that tenant's
waits.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from mcp_jobs.operations.models import Envelope
from mcp_jobs.operations.scope import Scope


class SendEventResult(Envelope):
    event_id: str | None = Field(default=None, description="the stored event's id")
    woken: int | None = Field(
        default=None, description="how many suspended jobs waiting for it were woken now"
    )
    tenant_id: str | None = Field(default=None, description="the tenant it was sent for")


async def send_event(
    scope: Scope, name: str, key: str, payload: Any = None, tenant_id: str | None = None
) -> SendEventResult:
    tenant = scope.tenant(tenant_id)
    sent = await scope.jobs.send_event(name, key, payload, tenant_id=tenant)
    return SendEventResult(ok=True, event_id=sent.event_id, woken=sent.woken, tenant_id=tenant)
