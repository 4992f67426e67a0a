"""One job as an operator sees it: record, a page of its steps and events, and when the next
attempt lands. Steps and events are paged: the newest first page, cursors for the ones before."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from schemas.events import EventRecord
from schemas.jobs import JobRecord
from schemas.steps import StepRecord


class TraceQuery(BaseModel):
    """Which page of a job's steps and events to read (checked by the client's bounds)."""

    model_config = ConfigDict(frozen=True)

    steps_limit: int = Field(default=50, ge=1, le=500)
    steps_cursor: str | None = None
    events_limit: int = Field(default=50, ge=1, le=500)
    events_cursor: str | None = None


class TracePage(BaseModel):
    """What a driver's `load_trace` answers: the record and one page of each history."""

    model_config = ConfigDict(frozen=True)

    job: JobRecord
    steps: list[StepRecord] = Field(
        description="The newest `steps_limit` steps before the cursor, in start order."
    )
    events: list[EventRecord] = Field(
        description="The newest `events_limit` events before the cursor, oldest first."
    )
    steps_total: int = Field(description="Every step this job's run has stored.")
    events_total: int = Field(description="Every event this job has stored.")
    steps_cursor: str | None = Field(
        default=None, description="Pass back as steps_cursor for the steps before this page."
    )
    events_cursor: str | None = Field(
        default=None, description="Pass back as events_cursor for the events before this page."
    )


class JobTrace(TracePage):
    # Delay before attempt 2, 3, … per the job's policy; empty when the job is not registered here.
    retry_delays_ms: list[int] = []
    registered: bool = True
