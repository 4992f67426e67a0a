"""What an OAuth access token lets a request do: its scopes gate tools, its tenant claim pins it.

Read from the SDK's per-request auth context; only a token the JWT verifier made
(`OAuthAccessToken`) carries grants, so the static bearer and stdio keep full access. This
module does not import PyJWT: every server imports it, the `oauth` extra is optional.

Scopes: `jobs:read` for everything (the transport refuses a token without it with 403
`insufficient_scope`); `jobs:write` for enqueue_job, retry_job, cancel_job, pause_queue,
resume_queue, send_event and retry_jobs/cancel_jobs with write=true; `backfills:write` for
run_backfill with write=true; `admin` for prune_history with write=true. A dry run needs only
`jobs:read`. Each scope stands alone: `admin` does not imply the others.
"""

from __future__ import annotations

from dataclasses import replace

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.types import Tool

from mcp_jobs.config import Settings
from mcp_jobs.errors import ScopeMissingError

READ = "jobs:read"
WRITE = "jobs:write"
BACKFILLS_WRITE = "backfills:write"
ADMIN = "admin"
SCOPES = (READ, WRITE, BACKFILLS_WRITE, ADMIN)

# The scope a call that changes something needs, by tool; any other mutating tool: jobs:write.
_WRITE_SCOPES = {"run_backfill": BACKFILLS_WRITE, "prune_history": ADMIN}
# Tools every call of which changes state (each has no dry run).
_ALWAYS_WRITE = frozenset(
    {"enqueue_job", "retry_job", "cancel_job", "pause_queue", "resume_queue", "send_event"}
)


class OAuthAccessToken(AccessToken):
    """A verified JWT access token, with the tenant its claim names (None: every tenant)."""

    tenant: str | None = None


def current_grant() -> OAuthAccessToken | None:
    """The OAuth token of the request being served, if it came with one."""
    token = get_access_token()
    return token if isinstance(token, OAuthAccessToken) else None


def needed_scopes(tool: str, *, mutating: bool) -> tuple[str, ...]:
    """What a call needs; `mutating` is a call that changes state (not a dry run)."""
    if not mutating:
        return (READ,)
    return (READ, _WRITE_SCOPES.get(tool, WRITE))


def authorize(settings: Settings, tool: str, *, mutating: bool) -> None:
    """Refuse the call with SCOPE_MISSING when the request's OAuth token lacks a scope it
    needs. Without OAuth there is nothing to check (static bearer, stdio); with it, a call that
    somehow carries no token is refused rather than let through."""
    refused = scope_refusal(settings, tool, mutating=mutating)
    if refused is not None:
        raise refused


def scope_refusal(settings: Settings, tool: str, *, mutating: bool) -> ScopeMissingError | None:
    """The SCOPE_MISSING a call would be refused with (`authorize`), else None: asked before
    offering a call (a dry run's confirm token) that would only be refused."""
    if settings.oauth is None:
        return None
    grant = current_grant()
    granted = grant.scopes if grant is not None else []
    for scope in needed_scopes(tool, mutating=mutating):
        if scope not in granted:
            client = grant.client_id if grant is not None else None
            return ScopeMissingError(
                tool, scope, granted, issuer=settings.oauth.issuer, client=client
            )
    return None


def hidden_by_grant() -> frozenset[str]:
    """The tools the request's OAuth token can never call: those that only change state
    (`_ALWAYS_WRITE`) without `jobs:write`. run_backfill, prune_history, retry_jobs and
    cancel_jobs stay: their dry runs need only `jobs:read`."""
    grant = current_grant()
    if grant is None or WRITE in grant.scopes:
        return frozenset()
    return _ALWAYS_WRITE


def callable_tools(tools: list[Tool]) -> list[Tool]:
    """`tools` less the ones the request's OAuth token can never call (`hidden_by_grant`)."""
    hidden = hidden_by_grant()
    return [t for t in tools if t.name not in hidden] if hidden else tools


def request_settings(settings: Settings) -> Settings:
    """`settings` as this request sees them: pinned to the token's tenant exactly as `--tenant`
    pins the server. The verifier refused a token naming another tenant than `--tenant`."""
    grant = current_grant()
    if grant is None or grant.tenant is None or grant.tenant == settings.tenant:
        return settings
    return replace(settings, tenant=grant.tenant, tenant_from_token=True)
