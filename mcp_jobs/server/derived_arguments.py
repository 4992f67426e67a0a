"""What the running server knows an argument of a refused call must be, for the refusal's fix
(`strict_refusal.Derived`): enqueue_job's `key` for a job imported here is the key the job
computes from the input, so a value moved to `key` from another name (`idempotency_key`) is
that key, never one the engine refuses next. A job known only by its published descriptor
takes the caller's own key: nothing is derived for it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from engine.errors import JobsError
from mcp_jobs.server.argument_values import MISSING
from mcp_jobs.server.calls import ToolContext
from mcp_jobs.server.strict_refusal import Derived


def derived_arguments(
    tool: str, arguments: Mapping[str, Any], ctx: ToolContext | None
) -> dict[str, Derived]:
    """The arguments of `tool`'s call that the server derives, by name."""
    name = arguments.get("name")
    if tool != "enqueue_job" or ctx is None or not isinstance(name, str):
        return {}
    try:
        registry = ctx.request_context.lifespan_context.jobs.registry
    except ValueError:  # no request under way (the server called directly): nothing known
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
