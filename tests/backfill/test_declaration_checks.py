"""A declaration that differs is never a re-import, a value that could never work is refused where
it is written, and a precondition's refusal says what to do rather than loop on its dry run."""

from __future__ import annotations

from typing import Any

import pytest

from engine.backfill import BackfillRegistry
from engine.backfill.errors import BackfillMigrationPendingError
from engine.backfill.rate import interval_ms
from engine.bounds import MAX_DELAY_MS
from engine.errors import JobsError
from engine.internal_jobs import dry_run_command
from tests.backfill.support import declare


@pytest.mark.parametrize(
    "changed",
    [
        {"environments": ("production",)},
        {"batch_size": 7},
        {"rate": 2.0},
        {"requires_fix": "alembic upgrade head"},
        {"description": "another sweep"},
    ],
)
def test_a_second_declaration_sharing_the_handler_is_refused_unless_identical(
    changed: dict[str, Any],
) -> None:
    registry = BackfillRegistry()
    first = declare(registry)

    with pytest.raises(JobsError) as caught:
        declare(registry, **changed)
    assert caught.value.code == "BACKFILL_NAME_TAKEN"
    assert registry.get("normalize_emails") is first  # the first declaration is kept whole

    # Not otherwise: the same declaration again (a module imported twice) is accepted.
    again = declare(registry)
    assert again.checksum == first.checksum and registry.require("normalize_emails").same_as(first)


def test_a_production_only_declaration_is_not_widened_by_a_second_one() -> None:
    registry = BackfillRegistry()
    declare(registry, environments=("production",))
    with pytest.raises(JobsError) as caught:
        declare(registry, batch_size=7)
    assert caught.value.code == "BACKFILL_NAME_TAKEN"
    kept = registry.require("normalize_emails")
    assert (kept.batch_size, kept.environments) == (100, ("production",))


@pytest.mark.parametrize("value", [None, 5, object()])
def test_environments_that_are_no_collection_of_names_are_refused_typed(value: object) -> None:
    with pytest.raises(JobsError) as caught:
        declare(BackfillRegistry(), environments=value)
    assert caught.value.code == "BACKFILL_DECLARATION_INVALID"
    assert caught.value.details is not None and caught.value.details["field"] == "environments"
    assert "environments=" in caught.value.fix


@pytest.mark.parametrize("rate", [1e-300, 1e-9])
def test_a_rate_whose_wait_between_batches_exceeds_the_duration_bound_is_refused(
    rate: float,
) -> None:
    assert interval_ms(rate) > MAX_DELAY_MS
    with pytest.raises(JobsError) as caught:
        declare(BackfillRegistry(), rate=rate)
    assert caught.value.code == "BACKFILL_DECLARATION_INVALID"
    assert caught.value.details is not None and caught.value.details["field"] == "rate"
    assert "rate=" in caught.value.fix


def test_the_slowest_rate_admitted_waits_within_the_duration_bound() -> None:
    # One batch per ten years is slow, but a bounded wait: the pass can still be reasoned about.
    slowest = 1000 / MAX_DELAY_MS
    definition = declare(BackfillRegistry(), rate=slowest)
    assert interval_ms(definition.rate) <= MAX_DELAY_MS


def test_a_pending_precondition_without_its_command_is_not_fixed_by_the_same_dry_run() -> None:
    error = BackfillMigrationPendingError("bf_req", "0007_add_column")
    assert error.fix != dry_run_command("bf_req")
    assert "mcp-jobs" not in error.fix  # nothing to run here: the app's migration is applied
    assert "0007_add_column" in error.fix and "requires()" in error.fix
    assert error.next_call is None
    # Not otherwise: with requires_fix declared, that command is the fix.
    declared = BackfillMigrationPendingError("bf_req", "0007_add_column", "alembic upgrade head")
    assert declared.fix == "alembic upgrade head"
