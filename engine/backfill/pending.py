"""Pending: declared for this environment minus completed in it — the list an alarm reads.

A failed or still-running pass does not count: only a `completed` ledger row in this environment
takes a name off the list. A backfill declared for other environments only is never pending here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from engine.backfill.declare import BackfillDefinition
from engine.backfill.errors import BackfillPendingError
from engine.backfill.ledger import completed_run
from schemas.backfill import BackfillRun


def runs_by_name(runs: Iterable[BackfillRun]) -> dict[str, list[BackfillRun]]:
    """Group ledger rows by backfill name, keeping their (newest first) order."""
    grouped: dict[str, list[BackfillRun]] = defaultdict(list)
    for run in runs:
        grouped[run.name].append(run)
    return grouped


def is_pending(
    definition: BackfillDefinition, environment: str, runs: Sequence[BackfillRun]
) -> bool:
    """`runs` are this backfill's ledger rows in `environment` (newest first)."""
    return pending_given(definition, environment, completed_run(runs))


def pending_given(
    definition: BackfillDefinition, environment: str, completed: BackfillRun | None
) -> bool:
    """The same rule given only what it depends on: the newest completed run of this backfill
    in `environment`, or None — so a reader fetches that one row, not the ledger."""
    return definition.applies_to(environment) and completed is None


def pending_definitions(
    definitions: Iterable[BackfillDefinition], environment: str, runs: Iterable[BackfillRun]
) -> list[BackfillDefinition]:
    """The declared backfills still to run in `environment`, given its ledger rows."""
    grouped = runs_by_name(r for r in runs if r.environment == environment)
    return [d for d in definitions if is_pending(d, environment, grouped.get(d.name, []))]


def pending_errors(
    definitions: Iterable[BackfillDefinition], environment: str, runs: Iterable[BackfillRun]
) -> list[BackfillPendingError]:
    """The same list as findings, each with the one line that runs it."""
    return [
        BackfillPendingError(d.name, environment)
        for d in pending_definitions(definitions, environment, runs)
    ]


__all__ = [
    "is_pending",
    "pending_definitions",
    "pending_errors",
    "pending_given",
    "runs_by_name",
]
