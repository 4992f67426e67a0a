"""The wire shape of an error: what an agent reads and acts on."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

RetryClass = Literal["terminal", "transient"]


class NextCall(BaseModel):
    """A tool call an agent can issue as is to act on the error."""

    model_config = ConfigDict(frozen=True)

    tool: str
    arguments: dict[str, Any]


class ErrorPayload(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: str
    title: str
    cause: str
    fix: str
    retryable: bool
    next_call: NextCall | None = None
    details: dict[str, Any] | None = None
