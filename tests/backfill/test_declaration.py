"""Declaring a backfill: refused when it could never sweep correctly, registered by name, and
checksummed so each ledger row names the code that made it. No database involved."""

from __future__ import annotations

from typing import Any

import pytest

from engine import JobRegistry
from engine.backfill import (
    PASS_JOB,
    BackfillRegistry,
    default_backfills,
    install_pass,
)
from engine.backfill.errors import (
    BackfillAppliedError,
    BackfillEnvironmentError,
    BackfillMigrationPendingError,
    BackfillPendingError,
    BackfillRunningError,
    BackfillStalledError,
    BackfillUnknownError,
)
from engine.errors import JobsError
from tests.backfill.support import declare


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", ""),
        ("name", "normalize emails; rm -rf /"),
        ("batch_size", 0),
        ("batch_size", True),
        ("rate", 0),
        ("rate", float("inf")),
        ("rate", -1.0),
        ("environments", "production"),
        ("environments", ("production", "production")),
        ("count", lambda: 0),
        ("handle", lambda rows: None),
        ("read", None),
        ("requires", lambda: None),
        ("key", None),
        # A description that is no text broke every describe_jobs answer (INTERNAL).
        ("description", 5),
        ("description", "a\x00b"),
    ],
)
def test_a_declaration_that_could_never_work_is_refused(field: str, value: object) -> None:
    registry = BackfillRegistry()
    with pytest.raises(JobsError) as caught:
        declare(registry, **{field: value})
    assert caught.value.code == "BACKFILL_DECLARATION_INVALID"
    assert len(registry) == 0


def test_a_valid_declaration_is_registered_by_name() -> None:
    registry = BackfillRegistry()
    definition = declare(registry, rate=2, environments=("staging", "production"))
    assert registry.require("normalize_emails") is definition
    assert registry.names() == ["normalize_emails"]
    assert definition.applies_to("staging") and not definition.applies_to("development")
    assert definition.batches_for(0) == 0 and definition.batches_for(101) == 2
    with pytest.raises(JobsError) as caught:
        registry.require("nope")
    assert caught.value.code == "BACKFILL_UNKNOWN"
    assert caught.value.details is not None and "meant" not in caught.value.details
    with pytest.raises(JobsError) as caught:
        registry.require("normalise_emails")
    assert 'no backfill named "normalise_emails" is declared (meant normalize_emails?)' in str(
        caught.value
    )


def test_one_name_declared_by_two_handlers_is_refused() -> None:
    registry = BackfillRegistry()
    declare(registry)
    declare(registry)  # the same handler again: a module re-import

    async def other_handle(rows: list[Any]) -> None:
        return None

    with pytest.raises(JobsError) as caught:
        declare(registry, handle=other_handle)
    assert caught.value.code == "BACKFILL_NAME_TAKEN"


def test_the_checksum_moves_with_the_declaration() -> None:
    base = declare(BackfillRegistry()).checksum
    assert declare(BackfillRegistry()).checksum == base
    assert declare(BackfillRegistry(), batch_size=50).checksum != base
    assert declare(BackfillRegistry(), rate=1).checksum != base

    async def handle_differently(rows: list[Any]) -> None:
        print(rows)

    assert declare(BackfillRegistry(), handle=handle_differently).checksum != base


def test_the_pass_job_is_declared_where_workers_look() -> None:
    # Declaring a backfill puts the pass in the default registries' worker (a process with
    # none leaves it out: test_undeclared_pass).
    registry = JobRegistry()
    backfills = BackfillRegistry()
    definition = install_pass(registry, backfills)
    assert install_pass(registry, backfills) is definition  # already bound: left alone
    assert install_pass(registry, default_backfills) is not definition
    assert registry.names() == [PASS_JOB]
    assert definition.describe().idempotent


def test_every_refusal_carries_one_runnable_line() -> None:
    errors: list[JobsError] = [
        BackfillUnknownError("x", ["a", "b"]),
        BackfillUnknownError("x", []),
        BackfillEnvironmentError("x", "development", ["production"]),
        BackfillEnvironmentError("x", "development", []),
        BackfillMigrationPendingError("x", "0007_add_column"),
        BackfillMigrationPendingError("x", "0007_add_column", "alembic upgrade head"),
        BackfillAppliedError("x", "development", "r1", 1),
        BackfillRunningError("x", "j1"),
        BackfillStalledError("x", 3, 10),
        BackfillPendingError("x", "development"),
    ]
    for error in errors:
        payload = error.to_payload()
        assert payload.fix and "\n" not in payload.fix
        assert payload.code.startswith("BACKFILL_")
    assert BackfillRunningError("x", "j1").retryable  # waiting for the pass clears it
    assert not BackfillAppliedError("x", "development", "r1", 1).retryable
    # No command fixes it here: MCP_JOBS_ENV=production on this deploy is the gate's bypass.
    assert "MCP_JOBS_ENV=" not in BackfillEnvironmentError("x", "development", ["production"]).fix
