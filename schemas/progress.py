"""A running job's own report of how far it got: `ctx.progress(done, total, message)`."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

# Published as one JSON number; a whole report stays an int in the answer (3, not 3.0).
Number = Annotated[int | float, WithJsonSchema({"type": "number"})]


class Progress(BaseModel):
    """The last value a job body reported (engine/progress.py stores it, throttled). It stays
    on the job once the run ends, and through a retry until the new attempt reports."""

    model_config = ConfigDict(frozen=True)

    done: Number = Field(description="units done so far, ≥ 0")
    total: Number | None = Field(
        default=None, description="units in all, > 0 and ≥ done; absent when unknown"
    )
    message: str | None = Field(default=None, description="the body's short line about it")
    at: int = Field(description="epoch ms the body reported this value")
    attempt: int = Field(description="the attempt that reported it")
