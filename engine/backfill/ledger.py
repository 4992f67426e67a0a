"""The ledger, read and written through the driver's `backfill_save` / `backfill_runs`.

One row per run. A run's row is written only by its own pass (a single writer, so no progress
can be overwritten by a stale copy), and a forced rerun is a new run with a new row: nothing
here ever writes a row whose `run_id` it did not create.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from schemas.backfill import BackfillRun
from schemas.states import BackfillStatus

APP_VERSION_ENV = "MCP_JOBS_APP_VERSION"


def app_version() -> str | None:
    """The deployed app's version as the deploy states it (`MCP_JOBS_APP_VERSION`), if it does."""
    return os.environ.get(APP_VERSION_ENV) or None


def completed_run(runs: Sequence[BackfillRun]) -> BackfillRun | None:
    """The newest completed run among `runs` (newest first), which is what makes a name applied."""
    return next((r for r in runs if r.status == "completed"), None)


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


__all__ = ["APP_VERSION_ENV", "Progress", "app_version", "completed_run"]
