"""OUTBOX_NO_TX on NATS: a NatsTransaction already committed is refused, and the fix stages
through a new one (`jobs.driver.transaction()`, written by `await tx.commit()`)."""

from __future__ import annotations

from typing import Any, cast

from engine import JobRegistry, Jobs
from tests.outbox.no_tx_fix import the_fix_runs_as_given


async def test_a_committed_transaction_is_refused_with_a_fix_that_runs(
    jobs: Jobs, registry: JobRegistry
) -> None:
    tx = cast(Any, jobs.driver).transaction()
    await tx.commit()
    fix = await the_fix_runs_as_given(jobs, registry, tx)
    assert "jobs.driver.transaction()" in fix and "tx.commit()" in fix
