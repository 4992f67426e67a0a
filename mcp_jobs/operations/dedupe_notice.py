"""An enqueue deduped into a live job that differs from the call says so (exploreS, exploreU):
the call's input, priority and schedule were not stored, and the job runs as it is. Without it,
an agent that enqueued again with its input corrected, or asked for "now" or "urgent", saw
`deduped: true` and believed its call would run."""

from __future__ import annotations

from typing import Any

from engine import bounds
from engine.bounds import MAX_DELAY_MS
from engine.enqueue_items import json_input
from engine.instants import instant
from engine.iso_time import iso
from mcp_jobs.operations.models import Finding
from mcp_jobs.operations.scope import Scope
from schemas.errors import NextCall
from schemas.jobs import JobRecord

OTHER_INPUT = "DEDUPED_OTHER_INPUT"
# Fields a cause names at most.
NAMED_FIELDS = 5
# A schedule this close to the one asked is the one asked (the call's own clock reading).
SAME_TIME_MS = 1_000


def stored_form(scope: Scope, name: str, input: dict[str, Any]) -> dict[str, Any]:
    """`input` as the enqueue stored it: validated by the job's model and dumped, for a job this
    process registers; as given for one known only by its published descriptor."""
    definition = scope.jobs.registry.get(name)
    if definition is None:
        return input
    return json_input(name, definition.parse_input(input))


def other_call_notice(
    scope: Scope,
    given: dict[str, Any],
    live: JobRecord,
    *,
    priority: int | None,
    delay_seconds: float | None,
    run_at: int | str | None,
) -> Finding | None:
    """DEDUPED_OTHER_INPUT when `live`, the job an enqueue was deduped into, holds another input
    (`given`, in its stored form), priority or schedule than the call asked; else None."""
    differs = []
    if given != live.input:
        keys = given.keys() | live.input.keys()
        fields = sorted(k for k in keys if given.get(k, ...) != live.input.get(k, ...))
        more = " …" if len(fields) > NAMED_FIELDS else ""
        differs.append(f"its input ({', '.join(fields[:NAMED_FIELDS])}{more})")
    if priority is not None and priority != live.priority:
        differs.append(f"its priority is {live.priority}, not {priority}")
    now = scope.jobs.clock.now_ms()
    asked = _asked_at(now, delay_seconds, run_at)
    if asked is None and live.state == "delayed" and live.run_at > now + SAME_TIME_MS:
        differs.append(f"it is due at {iso(live.run_at)}, not now")
    elif asked is not None and abs(asked - live.run_at) > SAME_TIME_MS:
        differs.append(f"it is due at {iso(live.run_at)}, not at {iso(asked)}")
    if not differs:
        return None
    return Finding(
        code=OTHER_INPUT,
        severity="warning",
        cause=f"job {live.id} of key {live.idempotency_key!r} is live ({live.state}), so this "
        f"enqueue was deduped into it, and it differs from this call: {'; '.join(differs)}. "
        "Nothing of this call was stored, and the job runs as it is. To run this call, enqueue "
        "it again once that job has ended, or cancel it first",
        fix=scope.fixes.command("jobs", "show", live.id, "--json"),
        next_call=NextCall(tool="inspect_job", arguments={"job_id": live.id}),
        job_ids=[live.id],
    )


def _asked_at(now: int, delay_seconds: float | None, run_at: int | str | None) -> int | None:
    """When the call asked the job to run (epoch ms), or None: it asked nothing (now). The
    enqueue has taken these values, so they are read as it read them."""
    if delay_seconds is not None:
        return now + int(bounds.seconds("delay", delay_seconds) * 1000)
    if run_at is not None:
        return instant("run_at", run_at, 0, now + MAX_DELAY_MS)
    return None


__all__ = ["OTHER_INPUT", "other_call_notice", "stored_form"]
