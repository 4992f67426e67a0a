"""What a registered job looks like from outside: enough for an agent to enqueue it correctly."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Backoff = Literal["exponential", "linear", "fixed"]


class RetryPolicyInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    attempts: int
    backoff: Backoff
    base_delay_ms: int
    max_delay_ms: int
    # Delay before attempt 2, 3, … N.
    delays_ms: list[int]


class JobDescriptor(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    queue: str
    description: str | None
    input_schema: dict[str, Any]
    retry: RetryPolicyInfo
    timeout_ms: int | None
    concurrency: int | None
    tenant_required: bool
    # Always true: `job()` refuses a declaration without an idempotency key. The key's value is
    # computed from input (app data) and never published.
    idempotent: bool
