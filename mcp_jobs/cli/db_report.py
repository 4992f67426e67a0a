"""`mcp-jobs db report`'s exit status: a database the report could not reach or read fails the
command with the error every command gets there (DRIVER_UNAVAILABLE for a server that does not
answer, DATABASE_URL_INVALID for a URL it refuses, …), so a script or an agent never reads
exit 0 as "healthy". The report's lines are still printed beside that error."""

from __future__ import annotations

import os
from typing import Any

from engine.driver_errors import DriverUnavailableError
from engine.drivers import open_driver
from engine.drivers.sqlite.errors import refusal_of
from engine.drivers.urls import report_fix, sqlite_path
from engine.errors import JobsError
from mcp_jobs.operations.models import DbReportResult

# The report was tried once, and so is the read that names its error: a PostgreSQL read is
# otherwise tried again through an outage for 10 s, and a NATS driver's first connect waits
# twice its 5 s timeout (2.5 s: the report's own bound).
_TRIED_ONCE: dict[str, dict[str, Any]] = {
    "postgres": {"retry_deadline_ms": 0},
    "nats": {"connect_timeout_s": 2.5},
}


async def refuse_unusable(kind: str, url: str, report: DbReportResult) -> None:
    """Raise the typed error of the `kind` database `report` says it could not use; return when it
    could, or when it is a SQLite file not made yet (a report: its `create it:` line makes it).

    The error is what a read through the driver raises, not one read off the report's lines:
    only the driver knows a server that is away (retryable) from one that refuses the URL."""
    if report.reachable is not False or _sqlite_not_made(kind, url):
        return
    probe = open_driver(url, **_TRIED_ONCE.get(kind, {}))
    try:
        await probe.live_workers(0)  # raises the error every command gets there
    except JobsError as exc:
        # Its fix is this very report, which would loop: what the report says to do is the fix.
        advice = "; ".join(report.lines[1:] if report.lines else [])
        if exc.fix == report_fix(url) and advice:
            exc.fix = advice
        raise
    finally:
        await probe.close()
    # It answers now (it came up since the report ran): the report's lines are stale.
    first = report.lines[0] if report.lines else "no answer"
    raise DriverUnavailableError(
        kind, f"the report could not use it ({first}); it answers now", report_fix(url)
    )


def _sqlite_not_made(kind: str, url: str) -> bool:
    # A read through the SQLite driver would create the file the report says is not there; a
    # file that cannot be made (a file where a directory must be) is refused as every command's.
    if kind != "sqlite":
        return False
    path = sqlite_path(url)
    return not os.path.lexists(path) and refusal_of(path) is None


__all__ = ["refuse_unusable"]
