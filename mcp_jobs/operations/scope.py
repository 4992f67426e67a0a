"""The Scope every operation runs in: who acts, for which tenant, under which limits."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.errors import InvalidArgumentError
from mcp_jobs.config import Settings
from mcp_jobs.errors import TenantPinnedError, TenantScopeExceededError
from mcp_jobs.fix_context import Face, FixContext, written_by_face

if TYPE_CHECKING:
    from engine.backfill import BackfillRegistry, Backfills
    from engine.client import Jobs

Progress = Callable[[float, float | None, str | None], Awaitable[None]]


_NO_EMPTY_TENANT = (
    "a tenant's name; a tenant is never '' (leave tenant_id out: every tenant's jobs to read, "
    "no tenant for a new job)"
)


async def _no_progress(progress: float, total: float | None, message: str | None) -> None:
    return None


@dataclass
class Scope:
    """One operation's view: the jobs client, the settings, who is acting, where progress goes.

    The tools and the CLI both run operations through a Scope, so a pinned tenant, the limits
    and the audit actor apply the same way to both.
    """

    jobs: Jobs
    settings: Settings
    tool: str
    actor: str
    progress: Progress = _no_progress
    # The declared backfills; None means the process-wide `default_backfills`.
    backfill_registry: BackfillRegistry | None = None
    # Who asked: a fix for the CLI is a command, one for an MCP client may be a tool call.
    face: Face = "mcp"
    # The caller's W3C traceparent (an MCP request's `_meta`): the parent of what it enqueues.
    traceparent: str | None = None
    # Tools the caller cannot call (mcp_jobs.server.served): no fix's next_call names one.
    unserved: frozenset[str] = frozenset()
    _backfills: Backfills | None = None
    _fixes: FixContext | None = None

    def __post_init__(self) -> None:
        # The engine's own context written into a stored error's fix as the client answers it
        # (`--database-url` of the client's URL) would stand in place of this face's: a client
        # lent to a face (the server's, a dashboard's) is the face's from here on.
        written_by_face(self.jobs)

    @property
    def fixes(self) -> FixContext:
        """The context every fix line this operation hands out is written with."""
        if self._fixes is None:
            self._fixes = FixContext.of(self.settings, face=self.face, unserved=self.unserved)
        return self._fixes

    def tenant(self, asked: str | None) -> str | None:
        """The tenant this call acts in: the pinned one, or what the caller asked for. An
        empty name is refused, not read as none: as a filter it widened to every tenant's jobs
        (a cancel_jobs for tenant "" planned them all), and an enqueue for it had no tenant."""
        if asked == "":
            raise InvalidArgumentError("tenant_id", asked, _NO_EMPTY_TENANT)
        pinned = self.settings.tenant
        if pinned is None:
            return asked
        if asked and asked != pinned:
            refused = TenantPinnedError(
                self.tool, pinned, asked, claim=self._pinning_claim(), command=self._a_command()
            )
            if self.face == "cli":
                # The pinned command itself, which acts in the pinned tenant (`--tenant`).
                refused.fix = self.fixes.command(*self.tool.split(), "--json")
            raise refused
        return pinned

    def across_tenants(self, operation: str, fix: Callable[[], str]) -> None:
        """Refuse `operation`, which acts on every tenant's data, in a scope pinned to one;
        `fix` makes the command an operator over every tenant runs instead."""
        pinned = self.settings.tenant
        if pinned is not None:
            raise TenantScopeExceededError(
                operation,
                pinned,
                fix(),
                agent=self.face == "mcp",
                claim=self._pinning_claim(),
                command=self._a_command(),
            )

    def _a_command(self) -> bool:
        """Whether a CLI command acts, pinned by its own --tenant: the dashboard writes its fixes
        as commands too (face "cli"), but a server (its own or `serve`'s) pins it."""
        return self.actor == "cli"

    def _pinning_claim(self) -> str | None:
        """The access token's claim that pins this scope's tenant; None when --tenant does."""
        oauth = self.settings.oauth
        return oauth.tenant_claim if oauth is not None and self.settings.tenant_from_token else None

    def backfills(self) -> Backfills:
        if self._backfills is None:
            from engine.backfill import Backfills

            self._backfills = Backfills(
                self.jobs,
                registry=self.backfill_registry,
                environment=self.settings.environment,
            )
        return self._backfills
