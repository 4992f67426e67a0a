"""One job as an operator sees it: record, steps, events and when the next attempt lands."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from schemas.events import EventRecord
from schemas.jobs import JobRecord
from schemas.steps import StepRecord


class JobTrace(BaseModel):
    model_config = ConfigDict(frozen=True)

    job: JobRecord
    steps: list[StepRecord]
    events: list[EventRecord]
    # Delay before attempt 2, 3, … per the job's policy; empty when the job is not registered here.
    retry_delays_ms: list[int] = []
    registered: bool = True
