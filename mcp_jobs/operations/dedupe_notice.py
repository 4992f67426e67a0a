"""An enqueue deduped into a live job that holds other input says so (exploreS): the caller's
input was not stored, and the job runs with the one it has. Without it, an agent that enqueued
again with its input corrected saw `deduped: true` and believed the correction would run."""

from __future__ import annotations

from typing import Any

from engine.enqueue_items import json_input
from mcp_jobs.operations.models import Finding
from mcp_jobs.operations.scope import Scope
from schemas.errors import NextCall
from schemas.jobs import JobRecord

OTHER_INPUT = "DEDUPED_OTHER_INPUT"
# Fields a cause names at most.
NAMED_FIELDS = 5


def stored_form(scope: Scope, name: str, input: dict[str, Any]) -> dict[str, Any]:
    """`input` as the enqueue stored it: validated by the job's model and dumped, for a job this
    process registers; as given for one known only by its published descriptor."""
    definition = scope.jobs.registry.get(name)
    if definition is None:
        return input
    return json_input(name, definition.parse_input(input))


def other_input_notice(scope: Scope, given: dict[str, Any], live: JobRecord) -> Finding | None:
    """DEDUPED_OTHER_INPUT when `live`, the job an enqueue of `given` was deduped into, holds
    other input; None when it holds the same."""
    if given == live.input:
        return None
    keys = given.keys() | live.input.keys()
    differ = sorted(
        k for k in keys if k not in given or k not in live.input or given[k] != live.input[k]
    )
    named = ", ".join(differ[:NAMED_FIELDS]) + (" …" if len(differ) > NAMED_FIELDS else "")
    return Finding(
        code=OTHER_INPUT,
        severity="warning",
        cause=f"job {live.id} of key {live.idempotency_key!r} is live ({live.state}), so this "
        f"enqueue was deduped into it, and its stored input differs from the one given here "
        f"({named}): the given input was not stored, and the job runs with its own. To run "
        "the given input, enqueue it again once that job has ended, or cancel it first",
        fix=scope.fixes.command("jobs", "show", live.id, "--json"),
        next_call=NextCall(tool="inspect_job", arguments={"job_id": live.id}),
        job_ids=[live.id],
    )


__all__ = ["OTHER_INPUT", "other_input_notice", "stored_form"]
