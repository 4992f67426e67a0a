"""OUTBOX_NO_TX on the memory driver: its fix opens the driver's own transaction
(`jobs.driver.transaction()`, committed by `jobs.driver.commit(tx)`), not an asyncpg one."""

from __future__ import annotations

import pytest

from engine import JobRegistry, Jobs
from engine.drivers.memory import MemoryDriver
from tests.outbox.no_tx_fix import the_fix_runs_as_given


@pytest.mark.drivers("memory", reason="the memory driver's transaction")
async def test_a_committed_memory_transaction_is_refused_with_a_fix_that_runs(
    jobs: Jobs, registry: JobRegistry
) -> None:
    assert isinstance(jobs.driver, MemoryDriver)
    tx = jobs.driver.transaction()
    jobs.driver.commit(tx)
    fix = await the_fix_runs_as_given(jobs, registry, tx)
    assert "jobs.driver.transaction()" in fix
