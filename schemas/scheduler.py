"""Durable scheduler state: the last occurrence each cron task fired, why it last could not fire,
and who leads."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from schemas.errors import ErrorPayload


class TaskFailure(BaseModel):
    """Why a task's rounds have not fired, stored by the scheduler for other processes (describe,
    diagnose) to read; the task's next claim clears it."""

    model_config = ConfigDict(frozen=True)

    error: ErrorPayload  # the latest round's
    since: int  # the first failed round of this run of failures
    last_failed_at: int
    rounds: int  # failed rounds in a row


class TaskState(BaseModel):
    model_config = ConfigDict(frozen=True)

    task: str
    last_fired_at: int | None
    updated_at: int
    # None: firing, or state stored before failures were (it reads as no failure).
    failure: TaskFailure | None = None


class LeaderLease(BaseModel):
    model_config = ConfigDict(frozen=True)

    holder: str
    expires_at: int
