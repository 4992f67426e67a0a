"""Output envelopes of the backfill tools (`run_backfill`, `list_backfills`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from mcp_jobs.models import Envelope
from schemas.backfill import BackfillPlan, BackfillRun, BackfillStart, BackfillState


class RunBackfillResult(Envelope):
    mode: Literal["dry_run", "write"] | None = Field(
        default=None, description="dry_run wrote nothing; write started a durable pass"
    )
    plan: BackfillPlan | None = Field(
        default=None,
        description="dry run: rows and batches a write would sweep; blocked_by says what a "
        "write would answer instead of starting",
    )
    start: BackfillStart | None = Field(
        default=None, description="write: the pass job (follow it with wait_for_job)"
    )
    run: BackfillRun | None = Field(
        default=None,
        description="write with wait_seconds: the pass's ledger row as the wait ended",
    )
    settled: bool | None = Field(
        default=None, description="write with wait_seconds: true when the pass job finished"
    )


class ListBackfillsResult(Envelope):
    environment: str | None = None
    backfills: list[BackfillState] | None = None
