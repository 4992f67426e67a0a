"""The claim is planned once per claim connection (a generic plan), so that one plan has to be
right for every queue: it walks a claim index in claim order, never sorts the backlog, and a
worker of a small queue never reads through another queue's backlog."""

from __future__ import annotations

from typing import Any, TypeAlias

import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.connections import PLANNED_ONCE_SETTINGS
from tests.postgres.conftest import DriverFactory
from tests.postgres.plan_probe import generic_plan, nodes, prepared

Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record]"

BULK = 10_000  # ready in queue "bulk"
RARE = 3  # ready in queue "rare"
# Reading through the bulk queue costs its index entries and heap pages (well over a hundred
# buffers); a claim of the rare queue alone costs a few index pages and its rows' pages.
MAX_BUFFERS = 100

CLAIM_TYPES = "bigint, int, text, bigint, text, boolean, text[], text[], text[]"
CLAIM_QUEUES_TYPES = "bigint, int, text, bigint, text, text[], boolean, text[], text[], text[]"


async def add_ready(sql: Conn, clock: ManualClock, first: int, count: int) -> None:
    """`count` ready jobs numbered from `first`; those past BULK in queue "rare" and of tenant
    "small", the others of tenant "big". One job name throughout: the column the old pause test
    (`name <> ALL ($8)`) was estimated to filter every row out of."""
    await sql.execute(
        """
        INSERT INTO mcp_jobs.jobs (id, run_id, name, queue, tenant_id, idempotency_key, input,
            state, max_attempts, run_at, queued_at, created_at, updated_at)
        SELECT lpad(g::text, 12, '0'), 'r' || g, 'work',
               CASE WHEN g > $3 THEN 'rare' ELSE 'bulk' END,
               CASE WHEN g > $3 THEN 'small' ELSE 'big' END,
               'k' || g, '{}', 'ready', 3, $4::bigint, $4::bigint, $4::bigint, $4::bigint
          FROM generate_series($1::int, $1::int + $2::int - 1) AS g
        """,
        first,
        count,
        BULK,
        clock.now_ms(),
    )


@pytest.fixture
async def backlog(driver: PostgresDriver, sql: Conn, clock: ManualClock) -> PostgresDriver:
    await add_ready(sql, clock, 1, BULK + RARE)
    await sql.execute("ANALYZE mcp_jobs.jobs")
    return driver


def lease_args(clock: ManualClock) -> tuple[int, int, str, int, str]:
    """A claim's first five arguments: now, a batch of 16, worker, lease, token."""
    return (clock.now_ms(), 16, "w", 30_000, "token")


async def claim_queues_plan(
    driver: PostgresDriver,
    sql: Conn,
    clock: ManualClock,
    queues: list[str],
    paused_queues: list[str] | None = None,
    paused_names: list[str] | None = None,
    excluded_tenants: list[str] | None = None,
) -> dict[str, Any]:
    """The generic plan of `claim_queues` for `queues`, run (and rolled back)."""
    return await generic_plan(
        sql,
        driver.db.q["claim_queues"],
        CLAIM_QUEUES_TYPES,
        *lease_args(clock),
        queues,
        True,
        paused_queues or [],
        paused_names or [],
        excluded_tenants or [],
        settings=PLANNED_ONCE_SETTINGS,
    )


def jobs_scan(node: dict[str, Any]) -> bool:
    return node.get("Relation Name") == "jobs" and "Scan" in node["Node Type"]


def buffers(plan: dict[str, Any]) -> int:
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


async def test_the_claim_is_planned_once_on_its_claim_connection(
    backlog: PostgresDriver,
) -> None:
    for _ in range(8):
        assert len(await backlog.claim("w", 1, 30_000, ["bulk"])) == 1
        assert len(await backlog.claim("w", 1, 30_000, None)) == 1
    assert len(backlog.db.generic.all) == 1
    async with backlog.db.planned_once() as conn:
        rows = await conn.fetch(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%SET state = ''running''%'"
        )
    assert len(rows) == 2, rows  # claim and claim_queues
    for row in rows:
        assert row["custom_plans"] == 0 and row["generic_plans"] >= 8, dict(row)


async def test_the_claim_connections_carry_the_planned_once_settings(
    backlog: PostgresDriver,
) -> None:
    await backlog.claim("w", 1, 30_000, ["bulk"])
    async with backlog.db.planned_once() as conn:
        for name, value in PLANNED_ONCE_SETTINGS.items():
            assert await conn.fetchval(f"SHOW {name}") == value, name


STEPS = 20_000  # stored after the claim was planned, for runs of other jobs


@pytest.mark.parametrize("query", ["claim", "claim_queues"])
async def test_a_claim_planned_before_any_step_was_stored_probes_steps_by_its_index(
    backlog: PostgresDriver, sql: Conn, clock: ManualClock, query: str
) -> None:
    """A new deployment's first claim is planned while the steps table is empty, and that plan
    is kept as the table grows: read as a scan, the has_steps probe would read every stored
    step once per claimed row, for as long as the connection lives."""
    types, tail = (
        (CLAIM_TYPES, (True, [], [], []))
        if query == "claim"
        else (CLAIM_QUEUES_TYPES, (["bulk"], True, [], [], []))
    )
    async with prepared(sql, backlog.db.q[query], types, PLANNED_ONCE_SETTINGS) as explain:
        assert (await explain(*lease_args(clock), *tail))["Actual Rows"] == 16
        await sql.execute(
            """
            INSERT INTO mcp_jobs.steps (run_id, name, job_id, status, started_at)
            SELECT 'other' || (g / 3), 's' || (g % 3), 'j' || (g / 3), 'done', 0
              FROM generate_series(1, $1::int) AS g
            """,
            STEPS,
        )
        plan = await explain(*lease_args(clock), *tail)
    assert plan["Actual Rows"] == 16
    probes = [n for n in nodes(plan) if n.get("Relation Name") == "steps"]
    assert probes and {n["Node Type"] for n in probes} <= {"Index Scan", "Index Only Scan"}, [
        (n["Node Type"], n.get("Index Name")) for n in probes
    ]
    # A few index pages a claimed row; read whole, the table is over a thousand.
    assert sum(buffers(n) for n in probes) <= 4 * 16, [buffers(n) for n in probes]


async def test_a_claim_planned_on_a_small_table_reads_by_index_once_it_grew(
    driver: PostgresDriver, sql: Conn, clock: ManualClock
) -> None:
    """A claim planned while the jobs table held a few rows would, left to the planner, lease
    its batch through a scan of the table: the cheapest read of one page, kept while the table
    grows until the statistics are next redone."""
    await add_ready(sql, clock, 1, RARE)
    async with prepared(sql, driver.db.q["claim"], CLAIM_TYPES, PLANNED_ONCE_SETTINGS) as explain:
        assert (await explain(*lease_args(clock), True, [], [], []))["Actual Rows"] == RARE
        await add_ready(sql, clock, RARE + 1, BULK)
        plan = await explain(*lease_args(clock), True, [], [], [])
    assert plan["Actual Rows"] == 16
    scans = [n["Node Type"] for n in nodes(plan) if "Scan" in n["Node Type"]]
    assert "Seq Scan" not in scans and "Bitmap Heap Scan" not in scans, scans
    assert buffers(plan) <= 4 * MAX_BUFFERS, buffers(plan)


async def test_a_claim_of_a_small_queue_never_reads_another_queues_backlog(
    backlog: PostgresDriver, sql: Conn, clock: ManualClock
) -> None:
    plan = await claim_queues_plan(backlog, sql, clock, ["rare"])
    assert plan["Actual Rows"] == RARE
    scans = {n.get("Index Name") for n in nodes(plan) if n.get("Relation Name") == "jobs"}
    assert "jobs_claim_queue_idx" in scans and "jobs_claim_idx" not in scans, scans
    assert buffers(plan) <= MAX_BUFFERS, buffers(plan)


async def test_the_generic_claim_of_every_queue_walks_its_index_in_order(
    backlog: PostgresDriver, sql: Conn, clock: ManualClock
) -> None:
    # One queue and one name: where `<> ALL` of the paused names was estimated to keep no row.
    await sql.execute("DELETE FROM mcp_jobs.jobs WHERE queue = 'rare'")
    await sql.execute("ANALYZE mcp_jobs.jobs")
    claim = backlog.db.q["claim"]
    plan = await generic_plan(
        sql,
        claim,
        CLAIM_TYPES,
        *lease_args(clock),
        True,
        [],
        [],
        [],
        settings=PLANNED_ONCE_SETTINGS,
    )
    assert plan["Actual Rows"] == 16
    # Each scan of the jobs table stops at the batch; a plan that sorts the backlog reads it all.
    read = [n["Actual Rows"] * n["Actual Loops"] for n in nodes(plan) if jobs_scan(n)]
    assert read and max(read) <= 16, read


@pytest.mark.parametrize("paused", ["queue", "name", "tenant"])
async def test_a_generic_claim_skips_what_is_paused(
    backlog: PostgresDriver, sql: Conn, clock: ManualClock, paused: str
) -> None:
    # Paused: the bulk queue, or (by name) nothing of the rare queue may run either. A full
    # tenant cap (big's: every bulk row) leaves the rare queue's rows, as a paused queue does.
    held = {"queue": (["bulk"], [], []), "name": ([], ["work"], []), "tenant": ([], [], ["big"])}
    plan = await claim_queues_plan(backlog, sql, clock, ["bulk", "rare"], *held[paused])
    assert plan["Actual Rows"] == (0 if paused == "name" else RARE)


async def test_a_generic_claim_past_a_full_tenant_still_walks_the_index_in_order(
    backlog: PostgresDriver, sql: Conn, clock: ManualClock
) -> None:
    # The tenant column holds one value in almost every row: spelled `<> ALL`, the test was
    # estimated to keep no row, and a plan made for none sorts the whole backlog.
    plan = await generic_plan(
        sql,
        backlog.db.q["claim"],
        CLAIM_TYPES,
        *lease_args(clock),
        True,
        [],
        [],
        ["small"],
        settings=PLANNED_ONCE_SETTINGS,
    )
    assert plan["Actual Rows"] == 16
    read = [n["Actual Rows"] * n["Actual Loops"] for n in nodes(plan) if jobs_scan(n)]
    assert read and max(read) <= 16, read


async def test_without_a_statement_cache_claims_use_the_general_connections(
    make_driver: DriverFactory,
) -> None:
    # statement_cache_size=0 is the PgBouncer setting: nothing to plan once, and a transaction
    # pooler would refuse the claim set's startup parameter.
    driver = await make_driver(statement_cache_size=0)
    assert await driver.claim("w", 1, 30_000, ["default"]) == []
    assert driver.db.generic.all == set() and driver.db.general.all
