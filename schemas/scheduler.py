"""Durable scheduler state: the last occurrence each cron task fired, and who leads."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class TaskState(BaseModel):
    model_config = ConfigDict(frozen=True)

    task: str
    last_fired_at: int | None
    updated_at: int


class LeaderLease(BaseModel):
    model_config = ConfigDict(frozen=True)

    holder: str
    expires_at: int
