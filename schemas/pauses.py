"""Pauses: a queue or a job name whose ready work no worker claims until it is resumed.

A pause is durable (a row in the database, not a worker's flag), so every worker on the
database honours it at its next claim, and a restart does not lift it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PauseKind = Literal["queue", "job"]
PAUSE_KINDS: tuple[PauseKind, ...] = ("queue", "job")


class Pause(BaseModel):
    """One pause in force: what it holds back, who set it, when and why."""

    model_config = ConfigDict(frozen=True)

    kind: PauseKind = Field(description="`queue`: every job of the queue; `job`: one job name")
    name: str = Field(description="the queue, or the job name")
    paused_by: str | None = Field(default=None, description="the actor that paused it")
    paused_at: int | None = Field(
        default=None,
        description="epoch ms; null when another program wrote the stored pause (it still holds)",
    )
    reason: str | None = None
