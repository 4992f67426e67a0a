"""A run that spans two definitions (the declaration changed between its attempts) keeps the
checksum it started under, and says that it changed: a warning and an event in the pass's
history."""

from __future__ import annotations

import logging

import pytest

from engine import Jobs, ManualClock, Worker
from engine.backfill import BackfillRegistry, Backfills
from tests.backfill.support import Customers


async def test_a_run_resumed_under_a_changed_declaration_keeps_its_first_checksum(
    jobs: Jobs,
    clock: ManualClock,
    backfills: Backfills,
    backfill_registry: BackfillRegistry,
    customers: Customers,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = customers.declare(backfill_registry, batch_size=10)
    customers.fail_once.add(customers.batches(10)[1][0])
    start = await backfills.write("normalize_emails")
    await Worker(jobs).run_until_idle()
    record = await jobs.get(start.job_id)
    assert record.state == "delayed"

    # The deploy between the attempts changes the sweep.
    backfill_registry.remove("normalize_emails")
    changed = customers.declare(backfill_registry, batch_size=7)
    assert changed.checksum != first.checksum
    clock.set(record.run_at)
    with caplog.at_level(logging.WARNING, logger="mcp_jobs.backfill"):
        await Worker(jobs).run_until_idle()

    assert (await jobs.get(start.job_id)).state == "done"
    (run,) = await jobs.driver.backfill_runs("normalize_emails")
    assert run.status == "completed" and run.checksum == first.checksum
    trace = await jobs.trace(start.job_id)
    (event,) = [e for e in trace.events if e.kind == "backfill_definition_changed"]
    assert event.data == {
        "backfill": "normalize_emails",
        "run_id": start.run_id,
        "started_checksum": first.checksum,
        "checksum": changed.checksum,
    }
    (warning,) = [r for r in caplog.records if "definition" in r.getMessage()]
    assert first.checksum in warning.getMessage() and changed.checksum in warning.getMessage()
    # What the listing compares: the declaration now against the run that applied it.
    (state,) = await backfills.list()
    assert state.checksum == changed.checksum
    assert state.last_run is not None and state.last_run.checksum == first.checksum
