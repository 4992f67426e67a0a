"""The caller's trace context: the `traceparent` a request carries in `_meta` (SEP-414; both
protocol eras the SDK serves put it there) becomes the parent of the job the call enqueues.

It is read from the request itself, not only from the ambient OpenTelemetry context the SDK's
middleware sets, so it holds without that middleware and for work that outlives the request's
context (a task). A malformed one is ignored with a debug log: it is metadata, not an argument.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from engine.errors import short_repr
from engine.tracing import current_traceparent, parse_traceparent

logger = logging.getLogger(__name__)

META_KEY = "traceparent"


def request_traceparent(meta: Mapping[str, Any] | None) -> str | None:
    """The traceparent to enqueue under, or None when the request carries no valid one.

    When the current span (the SDK's span for this request) continues the caller's trace, its
    traceparent is used, so the job nests under the server's span; otherwise the caller's."""
    raw = None if meta is None else meta.get(META_KEY)
    if raw is None:
        return None
    given = parse_traceparent(raw)
    if given is None:
        logger.debug("ignoring a malformed traceparent in the request's _meta: %s", short_repr(raw))
        return None
    ambient = parse_traceparent(current_traceparent())
    if ambient is not None and ambient.trace_id == given.trace_id:
        return ambient.format()
    return given.format()
