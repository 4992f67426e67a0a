"""Backfills as every surface sees them: the ledger row, a dry run's plan, a write's receipt, and
the declared-plus-ledger state an alarm or an agent reads."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from schemas.errors import ErrorPayload
from schemas.states import BackfillStatus


class BackfillRun(BaseModel):
    """One ledger row: one pass of one backfill in one environment. A forced rerun writes a NEW
    row and never edits this one."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    name: str
    checksum: str
    environment: str
    status: BackfillStatus
    app_version: str | None
    rows_processed: int
    rows_total: int | None = None
    cursor: Any = None
    job_id: str | None = None
    started_at: int
    finished_at: int | None = None
    error: str | None = None


class BackfillPlan(BaseModel):
    """What a write would sweep, from a dry run that wrote nothing anywhere."""

    model_config = ConfigDict(frozen=True)

    name: str
    environment: str
    checksum: str
    rows_remaining: int
    batch_size: int
    batches: int
    # The keys of the first rows a write would hand to `handle`, in order.
    sample_keys: list[Any]
    would_run: bool
    # What a write would answer instead of starting (BACKFILL_APPLIED, BACKFILL_RUNNING,
    # BACKFILL_ENVIRONMENT), so a rehearsal also tells what the real call would say.
    blocked_by: ErrorPayload | None = None
    # Whether this rehearses a forced write (`force`): the write that would run is that one.
    force: bool = False


class BackfillStart(BaseModel):
    """A write's receipt: the durable pass job and the ledger run it will write."""

    model_config = ConfigDict(frozen=True)

    name: str
    environment: str
    job_id: str
    run_id: str
    deduped: bool


class BackfillState(BaseModel):
    """A declared backfill with its ledger state in this environment."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str | None
    environments: list[str]
    batch_size: int
    rate: float | None
    checksum: str
    # Declared for this environment and no completed pass recorded here.
    pending: bool
    last_run: BackfillRun | None
    # The live pass job (ready, delayed, running or suspended), if one holds the name.
    live_job_id: str | None
