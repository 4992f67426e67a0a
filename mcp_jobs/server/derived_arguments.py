"""What the running server knows an argument of a refused call must be, for the refusal's fix
(`strict_refusal.Derived`): enqueue_job's `key` for a job imported here is the key the job
computes from the input, so a value moved to `key` from another name (`idempotency_key`) is
that key, never one the engine refuses next. A job known only by its published descriptor
takes the caller's own key: nothing is derived for it. On a server pinned to a tenant, a value
moved to `tenant_id` (`tenantId`) is the pinned tenant, never one TENANT_PINNED refuses next."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from engine import JobRegistry
from engine.errors import JobsError
from mcp_jobs.server.argument_values import MISSING
from mcp_jobs.server.calls import ToolContext
from mcp_jobs.server.oauth_grants import request_settings
from mcp_jobs.server.strict_refusal import Derived


def derived_arguments(
    tool: str, arguments: Mapping[str, Any], ctx: ToolContext | None
) -> dict[str, Derived]:
    """The arguments of `tool`'s call that the server derives, by name."""
    if ctx is None:
        return {}
    try:
        state = ctx.request_context.lifespan_context
    except ValueError:  # no request under way (the server called directly): nothing known
        return {}
    derived = _key(tool, arguments, state.jobs.registry)
    pinned = request_settings(state.settings).tenant  # --tenant, or the token's claim
    if pinned is not None:
        # Any other tenant is refused (TENANT_PINNED): one moved there is the pinned one.
        derived["tenant_id"] = Derived(pinned, f"this server is pinned to tenant {pinned!r}")
    return derived


def _key(tool: str, arguments: Mapping[str, Any], registry: JobRegistry) -> dict[str, Derived]:
    """enqueue_job's `key`, for a job imported here."""
    name = arguments.get("name")
    if tool != "enqueue_job" or not isinstance(name, str):
        return {}
    definition = registry.get(name)
    if definition is None:
        return {}
    try:
        key = definition.key_for(definition.parse_input(arguments.get("input")))
    except (ValidationError, JobsError):
        why = f"job {name!r} computes its own key (from an input it takes)"
        return {"key": Derived(MISSING, why)}
    return {"key": Derived(key, f"job {name!r} computes its key from this input")}
