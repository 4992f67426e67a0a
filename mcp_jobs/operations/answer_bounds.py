"""How many items an answer that would grow with the installation lists (queue_stats' queues,
diagnose_queue's findings, describe_jobs' descriptors): `SHOWN` unless the caller asks for up to
the page cap. One answer stays a few tens of KB at 2,000 queues or job names; the rest is
counted, and the answer says how to see it."""

from __future__ import annotations

from typing import Any

from engine.errors import InvalidArgumentError
from mcp_jobs.errors import LimitExceededError, example_call
from mcp_jobs.operations.scope import Scope


def checked_limit(scope: Scope, tool: str, limit: int, call: dict[str, Any]) -> int:
    """`limit` when it is 1 to the server's page cap, else refused as list_jobs refuses its
    page size: LIMIT_EXCEEDED with the same call at the cap as the fix."""
    cap = scope.settings.limits.max_page_size
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgumentError("limit", limit, f"a whole number from 1 to {cap}", nearest=1)
    if limit > cap:
        fix = f"{tool} {example_call({**call, 'limit': cap})}"
        raise LimitExceededError("limit", limit, cap, "items", fix)
    return limit
