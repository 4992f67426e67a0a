"""Durable step records: what replay reads to skip work already done."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from schemas.states import StepStatus


class StepRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    job_id: str
    run_id: str
    name: str
    status: StepStatus
    # JSON-serializable result of a completed step; for a sleep, `{"wake_at": ms}`.
    output: Any = None
    error: str | None = None
    started_at: int
    finished_at: int | None = None
    attempts: int = 1
