"""`database_report`: what the database server says about itself, for the tool and `db report`.

The fix of an error that says the database does not answer, is full or refuses. Through MCP it
runs on the server's side, which reaches the database by definition, so an agent with no shell
(or on another machine) can still read it.
"""

from __future__ import annotations

from engine.drivers.base import REPORT, Driver, require
from engine.drivers.urls import redact
from mcp_jobs.operations.models import DbReportResult
from mcp_jobs.operations.scope import Scope


async def database_report(scope: Scope) -> DbReportResult:
    """The report on the scope's database. It shows the whole server (other sessions, other
    databases), so a server pinned to one tenant refuses it and names the operator's command."""
    report = ("db", "report", "--json")
    scope.across_tenants("the database report", lambda: scope.fixes.command(*report))
    return await report_of(scope.jobs.driver, scope.settings.url)


async def report_of(driver: Driver, url: str) -> DbReportResult:
    """The driver's `ServerReport` as an envelope; a server that does not answer is what the
    report says (`reachable: false`), not a failure of it."""
    found = await require(driver, REPORT).server_report()
    return DbReportResult(
        ok=True,
        driver=driver.kind,
        database=redact(url),
        reachable=found.reachable,
        lines=found.lines,
    )
