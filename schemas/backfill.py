"""The backfill ledger: one row per pass, never edited by a later forced rerun."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from schemas.states import BackfillStatus


class BackfillRun(BaseModel):
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
