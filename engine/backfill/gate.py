"""The gate: whether a write may start a pass, and the typed refusal when it may not.

Checked in this order, each answering with a different next step: the environment (change
environment, or declare it), the precondition (migrate first), a live pass (look at it), a
completed pass here (force). A name nobody declared is refused before any of these, by the
registry. The same verdict is what a dry run reports as `blocked_by`.
"""

from __future__ import annotations

import os

from engine.backfill.declare import BackfillDefinition
from engine.backfill.errors import (
    BackfillAppliedError,
    BackfillEnvironmentError,
    BackfillMigrationPendingError,
    BackfillRunningError,
)
from engine.errors import JobsError
from schemas.backfill import BackfillRun

ENVIRONMENT_ENV = "MCP_JOBS_ENV"
DEFAULT_ENVIRONMENT = "development"


def resolve_environment(explicit: str | None = None) -> str:
    """The explicit environment, else `MCP_JOBS_ENV`, else "development"."""
    return explicit or os.environ.get(ENVIRONMENT_ENV) or DEFAULT_ENVIRONMENT


def check_environment(definition: BackfillDefinition, environment: str) -> None:
    if not definition.applies_to(environment):
        raise BackfillEnvironmentError(definition.name, environment, definition.environments)


async def check_requires(definition: BackfillDefinition) -> None:
    """Run the declaration's precondition; raise BACKFILL_MIGRATION_PENDING when it names what
    is missing. Called before anything of the app's is read or written."""
    if definition.requires is None:
        return
    missing = await definition.requires()
    if missing is None:
        return
    if not isinstance(missing, str) or not missing:
        missing = repr(missing)
    raise BackfillMigrationPendingError(definition.name, missing, definition.requires_fix)


def write_verdict(
    definition: BackfillDefinition,
    environment: str,
    *,
    completed: BackfillRun | None,
    live_job_id: str | None,
    force: bool,
) -> JobsError | None:
    """The refusal a write would get once the precondition holds, or None when it may start.

    A live pass outranks a completed one: with a forced rerun in flight, `--force` again would
    not help, and the pass holding the name is what to look at.
    """
    if not definition.applies_to(environment):
        return BackfillEnvironmentError(definition.name, environment, definition.environments)
    if live_job_id is not None:
        return BackfillRunningError(definition.name, live_job_id)
    if completed is not None and not force:
        return BackfillAppliedError(
            definition.name, environment, completed.run_id, completed.finished_at
        )
    return None


__all__ = [
    "DEFAULT_ENVIRONMENT",
    "ENVIRONMENT_ENV",
    "check_environment",
    "check_requires",
    "resolve_environment",
    "write_verdict",
]
