"""The ledger, read and written through the driver's `backfill_save` / `backfill_runs`.

One row per run. A run's row is written only by its own pass (a single writer, so no progress
can be overwritten by a stale copy), and a forced rerun is a new run with a new row: nothing
here ever writes a row whose `run_id` it did not create.

The ledger is kept (it is the record of what ran), so it is read a page at a time: one
backfill's runs in one environment, newest first, `limit` at a time, with a cursor — the last
row's position (started_at, run_id), encoded and checked by `engine.paging`, bound to the
backfill's name — for the older ones. A cursor that does not decode, or came from another
name's page, is CURSOR_INVALID before a driver sees it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine import paging
from engine.drivers.base import RunPosition
from engine.errors import JobCancelledError
from engine.run_job import error_line
from schemas.backfill import BackfillRun
from schemas.errors import NextCall
from schemas.jobs import JobRecord
from schemas.states import LIVE_STATES, BackfillStatus

APP_VERSION_ENV = "MCP_JOBS_APP_VERSION"

DEFAULT_RUNS_PAGE = 20  # ledger rows in one page unless asked otherwise
MAX_RUNS_PAGE = 200
MAX_RUNS_CURSOR_BYTES = paging.MAX_RUNS_CURSOR_BYTES


def app_version() -> str | None:
    """The deployed app's version as the deploy states it (`MCP_JOBS_APP_VERSION`), if it does."""
    return os.environ.get(APP_VERSION_ENV) or None


def completed_run(runs: Sequence[BackfillRun]) -> BackfillRun | None:
    """The newest completed run among `runs` (newest first), which is what makes a name applied."""
    return next((r for r in runs if r.status == "completed"), None)


def as_settled(run: BackfillRun, job: JobRecord) -> BackfillRun:
    """`run` as its pass job says it ended. The row stays `running` while the job is live (an
    attempt that failed and will run again included); a job that then settles without its body
    running — cancelled while it waited for a retry, dead after leases that kept expiring —
    leaves the row as it was, and a reader shows it `failed`, with the job's end and error."""
    if run.status != "running" or job.state in LIVE_STATES or job.state == "done":
        return run
    error: str | None = run.error
    if job.state == "cancelled":
        error = error_line(JobCancelledError(job.id).to_payload())
    elif job.last_error is not None:
        error = error_line(job.last_error)
    ended = job.finished_at if job.finished_at is not None else job.updated_at
    return run.model_copy(update={"status": "failed", "finished_at": ended, "error": error})


@dataclass(frozen=True)
class RunsPage:
    """One page of a backfill's ledger rows, newest first, and the cursor for the older ones
    (None on the last page)."""

    runs: list[BackfillRun]
    runs_cursor: str | None


def runs_cursor(run: BackfillRun) -> str:
    """The cursor that continues after `run` (the last row of a page)."""
    return paging.runs_cursor(run.started_at, run.run_id, run.name)


def parse_runs_cursor(value: object, name: str, argument: str = "runs_cursor") -> RunPosition:
    """The position a runs cursor of backfill `name` names; CURSOR_INVALID when `value` does not
    decode or another name's page handed it out (its fix: `name`'s first page, or with no name
    the list of backfills), INVALID_ARGUMENT when it is not text at all. `argument`: the
    parameter it was given as, which a refusal names."""
    call = NextCall(tool="list_backfills", arguments={"name": name} if name else {})
    return RunPosition(*paging.parse_runs_cursor(value, name, call, argument))


@dataclass(frozen=True)
class Progress:
    """A pass's position, from which every ledger write of its run is built."""

    run_id: str
    name: str
    environment: str
    job_id: str
    started_at: int
    rows_total: int | None = None
    rows_processed: int = 0
    batches: int = 0
    cursor: Any = None

    def advanced(self, rows: int, cursor: Any) -> Progress:
        return replace(
            self,
            rows_processed=self.rows_processed + rows,
            batches=self.batches + (1 if rows else 0),
            cursor=cursor if rows else self.cursor,
        )

    @property
    def rows_remaining(self) -> int | None:
        if self.rows_total is None:
            return None
        return max(0, self.rows_total - self.rows_processed)

    def row(
        self,
        status: BackfillStatus,
        *,
        checksum: str,
        finished_at: int | None = None,
        error: str | None = None,
    ) -> BackfillRun:
        return BackfillRun(
            run_id=self.run_id,
            name=self.name,
            checksum=checksum,
            environment=self.environment,
            status=status,
            app_version=app_version(),
            rows_processed=self.rows_processed,
            rows_total=self.rows_total,
            cursor=self.cursor,
            job_id=self.job_id,
            started_at=self.started_at,
            finished_at=finished_at,
            error=error,
        )


__all__ = [
    "APP_VERSION_ENV",
    "DEFAULT_RUNS_PAGE",
    "MAX_RUNS_CURSOR_BYTES",
    "MAX_RUNS_PAGE",
    "Progress",
    "RunsPage",
    "app_version",
    "as_settled",
    "completed_run",
    "parse_runs_cursor",
    "runs_cursor",
]
