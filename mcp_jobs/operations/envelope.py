"""The ONE place a failure becomes an envelope, for the tools and the CLI's `--json` alike.

An engine error (`JobsError`) keeps its code, cause and fix, also when a task group wrapped it.
Anything else is a bug: it becomes `INTERNAL` with a correlation id, and the traceback goes to
the server log and a file of its own under that id (`mcp_jobs.incidents`, the fix's `cat`) —
never into the result, where it would leak internals and teach an agent nothing it can act on.

Whatever an error echoes of the caller's input is bounded here (`bounded`), whichever module
built it: a 10 MB argument never comes back as a 20 MB answer.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
from typing import Any

from engine.errors import JobsError
from mcp_jobs import incidents
from mcp_jobs.errors import InternalError
from mcp_jobs.fix_context import FixContext
from mcp_jobs.operations.models import Envelope
from schemas.errors import ErrorPayload, NextCall

logger = logging.getLogger("mcp_jobs.server")


def new_correlation_id() -> str:
    return secrets.token_hex(6)


def error_payload(
    exc: BaseException,
    *,
    where: str,
    call: NextCall | None = None,
    context: FixContext | None = None,
) -> ErrorPayload:
    """The payload for `exc`; an unexpected exception is logged with a fresh correlation id.
    With `context` (the caller's Scope.fixes), a fix that is a command is written to run as
    given from anywhere: the database, the app, the environment it needs."""
    exc = sole(exc)
    if isinstance(exc, JobsError):
        payload = exc.to_payload()
        return context.qualify_all(payload) if context is not None else payload
    correlation_id = new_correlation_id()
    logger.error(
        "%s failed unexpectedly [correlation_id=%s]",
        where,
        correlation_id,
        exc_info=exc,
        extra={"correlation_id": correlation_id},
    )
    kept = incidents.record(where, correlation_id, exc)
    return InternalError(where, correlation_id, kept, call).to_payload()


def sole(exc: BaseException) -> BaseException:
    """`exc`, or the one failure a task group wrapped in it (a worker's metrics port taken, a
    server's bind refused): that failure's code, not INTERNAL."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


# Bounds on an error's text: each string, each list, the nesting, and the whole payload.
TEXT_LIMIT = 1000
ITEMS_LIMIT = 50
DEPTH_LIMIT = 8
PAYLOAD_LIMIT = 16 * 1024


def bounded_text(text: str, limit: int = TEXT_LIMIT) -> str:
    """`text` cut to `limit` characters with a marker, and safe to encode as UTF-8."""
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text)} characters in all)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no transport could send it
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _bound(value: Any, depth: int, cut: list[bool]) -> Any:
    if isinstance(value, str):
        shown = bounded_text(value)
        if shown != value:
            cut.append(True)
        return shown
    if isinstance(value, float) and not math.isfinite(value):
        cut.append(True)
        return repr(value)  # JSON has no NaN or Infinity
    if value is None or isinstance(value, bool | int | float):
        return value
    if depth >= DEPTH_LIMIT:
        cut.append(True)
        return bounded_text(repr(value), 200)
    if isinstance(value, dict):
        items = list(value.items())
        out = {bounded_text(str(k), 200): _bound(v, depth + 1, cut) for k, v in items[:ITEMS_LIMIT]}
        if len(items) > ITEMS_LIMIT:
            cut.append(True)
            out["…"] = f"{len(items) - ITEMS_LIMIT} more"
        return out
    if isinstance(value, list | tuple):
        head = [_bound(v, depth + 1, cut) for v in value[:ITEMS_LIMIT]]
        if len(value) > ITEMS_LIMIT:
            cut.append(True)
            head.append(f"… {len(value) - ITEMS_LIMIT} more")
        return head
    cut.append(True)
    return bounded_text(repr(value), 200)


def bounded(payload: ErrorPayload) -> dict[str, Any]:
    """The payload as JSON, every string, list and nesting level bounded, and the whole under
    `PAYLOAD_LIMIT`. A next call that had to be cut is dropped: it would not run as given."""
    data = payload.model_dump(mode="json")
    out: dict[str, Any] = {k: _bound(data[k], 0, []) for k in ("code", "title", "cause", "fix")}
    out["retryable"] = data["retryable"]
    cut: list[bool] = []
    call = _bound(data["next_call"], 0, cut)
    if call is not None and not cut:
        out["next_call"] = call
    if data["details"] is not None:
        out["details"] = _bound(data["details"], 0, [])
    if len(json.dumps(out, ensure_ascii=False).encode()) > PAYLOAD_LIMIT:
        out["details"] = {"(cut)": "the details were too large to send"}
        out.pop("next_call", None)
    return out


def failure(payload: ErrorPayload) -> dict[str, Any]:
    """The envelope of a failure: valid against every tool's output schema, and bounded."""
    return {"ok": False, "error": bounded(payload)}


def success(model: Envelope) -> dict[str, Any]:
    """The envelope of a success: a field that is None is left out (no `"error": null`, no wall
    of nulls), and the published output schemas require none of them (`server.schemas`).
    Values inside free-form JSON (a job's input or output) are sent as they are."""
    return model.model_dump(mode="json", exclude_none=True)
