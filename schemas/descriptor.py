"""What a registered job looks like from outside: enough for an agent to enqueue it correctly."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Backoff = Literal["exponential", "linear", "fixed"]
# Where a description comes from: the registry of this process (its code is imported here), or
# the database, where a worker that imports it published it (engine/descriptors.py).
DescriptorSource = Literal["registry", "published"]


class RetryPolicyInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    attempts: int
    backoff: Backoff
    base_delay_ms: int
    max_delay_ms: int
    # Delay before attempt 2, 3, … N.
    delays_ms: list[int]


class RateLimitInfo(BaseModel):
    """A declared rate limit (engine.rate_limits): `limit` starts per `per_ms`, `burst` at once;
    `keyed`: each value of a key computed from the input has a limit of its own."""

    model_config = ConfigDict(frozen=True)

    limit: int
    per_ms: int
    burst: int = 1
    keyed: bool = False


class RetentionInfo(BaseModel):
    """How long the worker that published a descriptor keeps the job's settled rows, per state,
    and (`audit_ms`) events of no job, in ms; null keeps them forever (engine.retention)."""

    model_config = ConfigDict(frozen=True)

    done_ms: int | None
    failed_ms: int | None
    dead_ms: int | None
    cancelled_ms: int | None
    audit_ms: int | None


class PublishedTask(BaseModel):
    """A cron task as the worker declaring it publishes it, carried on one of that worker's job
    descriptors (engine/tasks/published.py): what a process without the task's code shows and
    diagnoses it by. Its description is cut to its first few hundred characters."""

    model_config = ConfigDict(frozen=True)

    name: str
    cron: str
    timezone: str
    catch_up: str
    max_catch_up: int
    description: str | None = None
    # The module that declares it (`task(...)`'s enqueue function's): what must change.
    module: str
    # When a worker running a scheduler last published it (epoch ms; 0: none has). A worker
    # without one carries the stored value forward. None: a row from before this field.
    scheduled_at: int | None = None


class JobDescriptor(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    queue: str
    description: str | None
    input_schema: dict[str, Any]
    retry: RetryPolicyInfo
    timeout_ms: int | None
    concurrency: int | None
    # What its enqueues get unless one names a priority (higher is claimed first).
    priority: int = 0
    tenant_required: bool
    # Its declared rate limit, if any: starts per period shared by every worker.
    rate_limit: RateLimitInfo | None = None
    # Always true: `job()` refuses a declaration without an idempotency key. The key's value is
    # computed from input (app data) and never published.
    idempotent: bool
    source: DescriptorSource = "registry"
    # A fingerprint of everything above: two workers describing one job alike publish one version.
    version: str | None = None
    # Published descriptors only: when (epoch ms) and by which worker, and the app modules that
    # worker imported (what `--app` names to run or enqueue it with the code).
    published_at: int | None = None
    published_by: str | None = None
    apps: list[str] | None = None
    # The directories that worker needed on PYTHONPATH to import `apps` (a module beside where
    # it started, not installed), so a line written elsewhere imports them too.
    app_paths: list[str] | None = None
    # True for a published descriptor: the key function is code this process has not imported,
    # so an enqueue from here passes the idempotency key itself (`key`).
    key_required: bool = False
    # Published descriptors only: no live worker has published it within the live-worker window.
    stale: bool | None = None
    # Published descriptors only: the policy its publisher prunes it by (None: that worker does
    # not prune). A prune elsewhere never deletes a row this keeps (engine.pruner.in_force).
    retention: RetentionInfo | None = None
    # Published descriptors only: cron tasks of the publishing worker this row carries (each task
    # on one row of its worker's; engine/tasks/published.py). Read apart, never shown with the job.
    tasks: list[PublishedTask] | None = None
