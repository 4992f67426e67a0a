"""The claiming process vacuums the jobs table between autovacuum's visits (sweep.py).

The statistics these tests steer by are the server's own, which a backend publishes lazily: every
change the tests count is made on the test's connection and published with
pg_stat_force_next_flush(), which the server honours before it answers the next statement.
"""

from __future__ import annotations

from typing import Any, TypeAlias
from uuid import uuid4

import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.sweep import Sweeper, stale_statistics
from engine.errors import InvalidArgumentError
from tests.postgres.builders import request
from tests.postgres.conftest import DriverFactory

Sql: TypeAlias = "asyncpg.Connection[asyncpg.Record]"
JOBS = "'mcp_jobs.jobs'::regclass"


async def enqueue(driver: PostgresDriver, clock: ManualClock, count: int) -> None:
    now = clock.now_ms()
    await driver.enqueue([request(now, key=str(i)) for i in range(count)])


async def touch_every_row(sql: Sql) -> None:
    """One counted change (and one dead row) per job, published to the statistics now."""
    await sql.execute("UPDATE mcp_jobs.jobs SET updated_at = updated_at + 1")
    await sql.execute("SELECT pg_stat_force_next_flush()")


async def stat(sql: Sql, function: str) -> Any:
    return await sql.fetchval(f"SELECT {function}({JOBS})")


@pytest.mark.parametrize(
    ("dead_rows", "jobs", "vacuums"),
    [(100, 150, 1), (200, 150, 0)],  # past the threshold: vacuumed; short of it: left alone
)
async def test_the_dead_row_count_decides_whether_a_sweep_vacuums(
    make_driver: DriverFactory,
    sql: Sql,
    clock: ManualClock,
    dead_rows: int,
    jobs: int,
    vacuums: int,
) -> None:
    driver = await make_driver()
    sweeper = Sweeper(driver.db, dead_rows)
    await enqueue(driver, clock, jobs)
    await touch_every_row(sql)
    assert await stat(sql, "pg_stat_get_dead_tuples") == jobs
    before = await stat(sql, "pg_stat_get_vacuum_count")

    assert await sweeper.sweep() is bool(vacuums)

    assert await stat(sql, "pg_stat_get_vacuum_count") - before == vacuums
    assert await stat(sql, "pg_stat_get_dead_tuples") == (0 if vacuums else jobs)


async def test_a_claim_past_the_threshold_vacuums_in_the_background(
    make_driver: DriverFactory, sql: Sql, clock: ManualClock
) -> None:
    driver = await make_driver(vacuum_dead_rows=100)
    await enqueue(driver, clock, 150)
    await touch_every_row(sql)
    before = await stat(sql, "pg_stat_get_vacuum_count")

    assert len(await driver.claim("w", 16, 30_000)) == 16
    assert driver.sweeper is not None
    await driver.sweeper.idle()

    assert await stat(sql, "pg_stat_get_vacuum_count") == before + 1
    assert await stat(sql, "pg_stat_get_dead_tuples") == 0


async def test_a_role_that_does_not_own_the_table_stops_asking(
    make_driver: DriverFactory, pg_url: str, sql: Sql, clock: ManualClock
) -> None:
    owner = await make_driver()
    await enqueue(owner, clock, 150)
    await touch_every_row(sql)
    guest = f"sweep_guest_{uuid4().hex[:8]}"
    await sql.execute(f"CREATE ROLE {guest} LOGIN")
    try:
        await sql.execute(f"GRANT USAGE ON SCHEMA mcp_jobs TO {guest}")
        host = pg_url.partition("@")[2]
        visitor = PostgresDriver(f"postgresql://{guest}@{host}", clock=clock)
        try:
            sweeper = Sweeper(visitor.db, 100)
            assert await sweeper.sweep() is False
            assert not sweeper.enabled
            sweeper.claimed(1_000)
            assert sweeper.checks == 0
        finally:
            await visitor.close()
        assert await stat(sql, "pg_stat_get_vacuum_count") == 0
    finally:
        await sql.execute(f"DROP OWNED BY {guest}")
        await sql.execute(f"DROP ROLE {guest}")


async def test_claims_check_first_then_once_per_eighth_of_the_threshold(
    make_driver: DriverFactory, clock: ManualClock
) -> None:
    driver = await make_driver(vacuum_dead_rows=80)
    await enqueue(driver, clock, 40)

    counts = []
    for _ in range(4):
        await driver.claim("w", 5, 30_000)
        assert driver.sweeper is not None
        await driver.sweeper.idle()
        counts.append(driver.sweeper.checks)

    assert driver.sweeper is not None and driver.sweeper.check_every == 10
    assert counts == [1, 1, 2, 2]


async def test_zero_leaves_the_table_to_autovacuum(
    make_driver: DriverFactory, clock: ManualClock
) -> None:
    driver = await make_driver(vacuum_dead_rows=0)
    await enqueue(driver, clock, 20)
    await driver.claim("w", 20, 30_000)
    assert driver.sweeper is not None and driver.sweeper.checks == 0


@pytest.mark.parametrize("value", [-1, 1.5, True, "100"])
def test_the_threshold_is_a_whole_number(value: object) -> None:
    with pytest.raises(InvalidArgumentError):
        PostgresDriver("postgresql://localhost/x", vacuum_dead_rows=value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changed", "analyzed_rows", "pages", "analyzed_pages", "stale"),
    [
        (999, -1, 31, 0, False),  # too few changes and pages to matter, even never analyzed
        (1_000, -1, 0, 0, True),  # never analyzed
        (20_000, 0, 0, 0, True),  # analyzed while empty, then filled
        (20_000, 19_999, 700, 700, True),  # changed more rows than the statistics saw
        (20_000, 40_000, 700, 700, False),  # within half: autovacuum's business
        (0, 0, 700, 0, True),  # grown, its changes not yet published by their sessions
        (0, 1_000, 64, 32, True),  # doubled in pages
        (0, 1_000, 63, 32, False),
    ],
)
def test_statistics_are_stale_once_the_changes_or_pages_outgrow_what_they_saw(
    changed: int, analyzed_rows: float, pages: int, analyzed_pages: int, stale: bool
) -> None:
    assert stale_statistics(changed, analyzed_rows, pages, analyzed_pages) is stale


async def test_a_first_claim_on_a_table_without_statistics_analyzes_it(
    make_driver: DriverFactory, sql: Sql, clock: ManualClock
) -> None:
    # Without statistics the planner sorted every ready row for each claim (8 ms at 20,000).
    driver = await make_driver()
    await enqueue(driver, clock, 3_000)  # its changes still unpublished: the pages decide
    before = await stat(sql, "pg_stat_get_analyze_count")

    assert len(await driver.claim("w", 16, 30_000, ["default"])) == 16
    assert driver.sweeper is not None
    await driver.sweeper.idle()

    assert driver.sweeper.analyzed == 1
    assert await stat(sql, "pg_stat_get_analyze_count") == before + 1
    plan = await sql.fetch(
        "EXPLAIN " + driver.db.q["claim_queues"],
        clock.now_ms(),
        16,
        "w",
        30_000,
        "token",
        ["default"],
        True,
        [],
        [],
        [],
    )
    text = "\n".join(row[0] for row in plan)
    assert "Index Scan using jobs_claim_queue_idx" in text, text
    assert "Sort Key: ((jobs.run_at" not in text, text  # the ready rows are not sorted
