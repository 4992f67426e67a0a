"""The audit trail: every mutating call an agent attempts, and every bulk action from any face,
is written to the events table as the tool's event (`AUDIT_EVENT`; the actor says the face)."""

from __future__ import annotations

import logging
from typing import Any

from engine import bounds
from engine.bounds import MAX_TENANT_BYTES
from engine.errors import InvalidArgumentError, JobsError, short_repr
from engine.logs import log_lost
from engine.storable import find_unstorable
from mcp_jobs.operations.scope import Scope

logger = logging.getLogger("mcp_jobs.server")

AUDIT_EVENT = "mcp.call"
# How much of one argument an audit event keeps: a refused call with a 5 MB id must not add 5 MB
# to the events table. The audited arguments are a fixed few per tool, so the event is bounded.
AUDIT_VALUE_CHARS = 200

# What an audited call acted on: (job id, tenant), when known from its result.
Subject = tuple[str | None, str | None]


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


def _tenant_tag(asked: Any) -> str | None:
    """The tenant the caller asked for, to tag the event with, when it can be a tenant's name:
    a refused one ("", a NUL, too many bytes) would have the event refused too."""
    try:
        return bounds.optional_text("tenant_id", asked, MAX_TENANT_BYTES)
    except InvalidArgumentError:
        return None


async def record_call(
    scope: Scope, tool: str, envelope: dict[str, Any], acted_on: Subject, audit: dict[str, Any]
) -> None:
    job_id, tenant = acted_on
    error = envelope.get("error") or {}
    arguments = {key: audit_value(value) for key, value in audit.items()}
    data: dict[str, Any] = {"tool": tool, "ok": envelope["ok"], "arguments": arguments}
    asked_tenant = _tenant_tag(audit.get("tenant_id"))
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
    except Exception as exc:
        # The change itself is done (or refused); losing its audit line must not change the
        # answer the caller gets.
        log_lost(logger, exc, "audit event for %s not recorded", tool)
