"""The ONE place a failure becomes an envelope, for the tools and the CLI's `--json` alike.

An engine error (`JobsError`) keeps its code, cause and fix. Anything else is a bug: it becomes
`INTERNAL` with a correlation id, and the traceback goes to the server log under that id — never
into the result, where it would leak internals and teach an agent nothing it can act on.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from mcp.types import CallToolResult, TextContent

from engine.errors import JobsError
from mcp_jobs.errors import InternalError
from mcp_jobs.models import Envelope
from schemas.errors import ErrorPayload, NextCall

logger = logging.getLogger("mcp_jobs.server")


def new_correlation_id() -> str:
    return secrets.token_hex(6)


def error_payload(exc: BaseException, *, where: str, call: NextCall | None = None) -> ErrorPayload:
    """The payload for `exc`; an unexpected exception is logged with a fresh correlation id."""
    if isinstance(exc, JobsError):
        return exc.to_payload()
    correlation_id = new_correlation_id()
    logger.error(
        "%s failed unexpectedly [correlation_id=%s]",
        where,
        correlation_id,
        exc_info=exc,
        extra={"correlation_id": correlation_id},
    )
    return InternalError(where, correlation_id, call).to_payload()


def failure(payload: ErrorPayload) -> dict[str, Any]:
    """The envelope of a failure: valid against every tool's output schema."""
    return {"ok": False, "error": payload.model_dump(mode="json")}


def success(model: Envelope) -> dict[str, Any]:
    return model.model_dump(mode="json")


def as_text(envelope: dict[str, Any]) -> str:
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))


def tool_result(envelope: dict[str, Any]) -> CallToolResult:
    """The same JSON twice: structured for clients that read `structuredContent`, text for the
    ones that only show content blocks."""
    return CallToolResult(
        is_error=not envelope["ok"],
        structured_content=envelope,
        content=[TextContent(type="text", text=as_text(envelope))],
    )


def tool_failure(exc: BaseException, *, where: str, call: NextCall | None = None) -> CallToolResult:
    return tool_result(failure(error_payload(exc, where=where, call=call)))
