"""OUTBOX_NO_TX on Redis: a pipeline that is no MULTI/EXEC transaction is refused, and the fix
stages through the driver's own (`jobs.driver.transaction()`, run by `await tx.execute()`)."""

from __future__ import annotations

from typing import Any, cast

from engine import JobRegistry, Jobs
from tests.outbox.no_tx_fix import the_fix_runs_as_given


async def test_a_pipeline_without_multi_is_refused_with_a_fix_that_runs(
    jobs: Jobs, registry: JobRegistry
) -> None:
    client: Any = cast(Any, jobs.driver)._store.client
    fix = await the_fix_runs_as_given(jobs, registry, client.pipeline(transaction=False))
    assert "jobs.driver.transaction()" in fix and "tx.execute()" in fix
