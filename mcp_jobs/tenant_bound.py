"""What a call loses when the tenant it asks for changes (TENANT_PINNED's fix: the call in the
pinned tenant): what was handed out for the call that returned it, tenant_id among its filters.
Kept, the mended call is refused for it (a list's cursor: CURSOR_INVALID), or carries a token
for another tenant's plan. One rule for the MCP call and the CLI line alike."""

from __future__ import annotations

from collections.abc import Sequence

from engine.errors import short_repr

# The arguments, by a tool's name for them, that go with the tenant of the call that handed
# them out: a list's cursor (list_jobs'), a bulk plan's confirm token (retry_jobs',
# cancel_jobs'). tests/mcp/test_pinned_fix_drops_tenant_bound.py pins every tool taking a
# tenant_id against it.
TENANT_BOUND = ("cursor", "confirm")


def lost_note(dropped: Sequence[str], asked: str) -> str:
    """The clause a TENANT_PINNED cause gains for what its fix left out (`dropped`, as the face
    names it: `cursor`, `--cursor`); "" when nothing was."""
    if not dropped:
        return ""
    what = " and ".join(dropped)
    return f"; {what} went with the call for tenant {short_repr(asked)}: the fix leaves it out"
