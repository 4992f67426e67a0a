"""A task's state as a scheduler of an earlier version wrote it (its `task_fired`: the row's
task, last fired occurrence and time, no failure) is claimed on from."""

from __future__ import annotations

import asyncpg

from engine.drivers.postgres import PostgresDriver
from tests.support.earlier_task_state import check_a_claim_continues_from


async def test_a_task_state_an_earlier_version_wrote_is_claimed_from(
    driver: PostgresDriver, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    await sql.execute(
        "INSERT INTO mcp_jobs.scheduler_state (task, last_fired_at, updated_at)"
        " VALUES ('t', 100, 5)"
    )
    await check_a_claim_continues_from(driver, "t", 100)
