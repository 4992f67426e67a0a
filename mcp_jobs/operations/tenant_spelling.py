"""A tenant filter that finds nothing where stored tenants differ from it only in case.

A tenant is matched exactly (`--tenant-id ACME` is not `acme`), so such a list answered an empty
page that looked like a tenant with no jobs. Read only for an empty page, at the cost of one page
of the newest rows (`known.STORED_SCAN`): the engine has no read of the tenant names stored.
"""

from __future__ import annotations

from mcp_jobs.errors import example_call
from mcp_jobs.operations.known import STORED_SCAN
from mcp_jobs.operations.models import Finding
from mcp_jobs.operations.scope import Scope
from schemas.errors import NextCall
from schemas.states import JobState

CODE = "TENANT_SPELT_OTHERWISE"
# list_jobs' own default page, left out of the call a notice hands out.
_DEFAULT_LIMIT = 50


async def tenant_spelt_otherwise(
    scope: Scope,
    asked: str | None,
    *,
    state: JobState | list[JobState] | None,
    name: str | None,
    queue: str | None,
    limit: int = _DEFAULT_LIMIT,
) -> list[Finding]:
    """A notice naming the stored tenants equal to `asked` but for case that the same filters
    find jobs of, its fix the list for the newest one; none when there are none. Never for a
    pinned caller: it must not learn another tenant's name."""
    if asked is None or scope.settings.tenant is not None:
        return []
    page = await scope.jobs.list(state=state, name=name, queue=queue, limit=STORED_SCAN)
    folded = asked.casefold()
    spelt = list(
        dict.fromkeys(
            job.tenant_id
            for job in page.jobs
            if job.tenant_id is not None
            and job.tenant_id != asked
            and job.tenant_id.casefold() == folded
        )
    )
    if not spelt:
        return []
    asked_for: dict[str, object] = {"state": state, "name": name, "queue": queue}
    asked_for |= {"tenant_id": spelt[0], "limit": None if limit == _DEFAULT_LIMIT else limit}
    arguments = {key: value for key, value in asked_for.items() if value is not None}
    stored = ", ".join(repr(tenant) for tenant in spelt)
    return [
        Finding(
            code=CODE,
            severity="warning",
            cause=f"no job of tenant {asked!r} matches; tenant {stored}, the same name in "
            "another case, has jobs that do (a tenant is matched exactly)",
            # A tool call: the CLI writes it as its `mcp-jobs jobs ls` command (FixContext).
            fix=f"list_jobs {example_call(arguments)}",
            next_call=NextCall(tool="list_jobs", arguments=arguments),
        )
    ]
