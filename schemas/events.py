"""The per-job event record: state changes worth reading later and every operator action."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class EventRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    job_id: str | None
    at: int
    kind: str
    # Who caused it: a worker id, "mcp:<tool>", "cli", "client".
    actor: str | None = None
    tenant_id: str | None = None
    data: dict[str, Any] | None = None
