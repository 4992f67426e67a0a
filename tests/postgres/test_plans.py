"""Reads cost what is live, not what ever ran: on a table of many settled rows and few live ones,
each read the operators and agents use most touches a bounded number of buffers (EXPLAIN
ANALYZE, BUFFERS), through the index meant for it, never a scan of the jobs table."""

from __future__ import annotations

import json
from typing import Any, TypeAlias

import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.connections import PLANNED_ONCE_SETTINGS
from engine.drivers.postgres.jobs import list_sql, stats_args
from engine.drivers.postgres.sql import with_schema
from schemas.jobs import JobFilter
from schemas.states import SETTLED_STATES
from tests.postgres.plan_probe import GENERIC, generic_plan

SETTLED = 60_000  # done long ago, in two names, two tenants
DEAD = 40
LIVE = 30
STEPS = 5_000
# A scan of the jobs table reads well over a thousand pages at this size; a read that costs the
# page, the live rows and the few dead ones stays far under this (a page of settled rows read
# by primary key after their index: about 3 buffers a row).
MAX_BUFFERS = 250

SETTLED_LIST_INDEXES = {
    "jobs_settled_state_idx",
    "jobs_settled_name_idx",
    "jobs_settled_queue_idx",
    "jobs_settled_tenant_idx",
}

Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record]"


@pytest.fixture
async def history(driver: PostgresDriver, sql: Conn, clock: ManualClock) -> PostgresDriver:
    now = clock.now_ms()
    old = now - 30 * 86_400_000
    await sql.execute(
        """
        INSERT INTO mcp_jobs.jobs (id, run_id, name, queue, tenant_id, idempotency_key, input,
            state, max_attempts, run_at, queued_at, created_at, updated_at, finished_at)
        SELECT lpad(g::text, 12, '0'), 'r' || g, 'hist' || (g % 2), 'default',
               't' || (g % 2), 'k' || g, '{}', 'done', 3,
               $2::bigint, $2::bigint, $2::bigint, $2::bigint, $2::bigint + g
          FROM generate_series(1, $1::int) AS g
        """,
        SETTLED,
        old,
    )
    await sql.execute(
        """
        INSERT INTO mcp_jobs.jobs (id, run_id, name, queue, tenant_id, idempotency_key, input,
            state, max_attempts, run_at, queued_at, created_at, updated_at, finished_at)
        SELECT lpad((g + $1)::text, 12, '0'), 'r' || (g + $1), 'hist0', 'default', 't0',
               'k' || (g + $1), '{}', 'dead', 3,
               $3::bigint, $3::bigint, $3::bigint, $3::bigint, $3::bigint
          FROM generate_series(1, $2::int) AS g
        """,
        SETTLED,
        DEAD,
        old,
    )
    await sql.execute(
        """
        INSERT INTO mcp_jobs.jobs (id, run_id, name, queue, tenant_id, idempotency_key, input,
            state, max_attempts, run_at, queued_at, created_at, updated_at)
        SELECT 'z' || lpad(g::text, 11, '0'), 'live' || g, 'hist0', 'default', 't0',
               'live' || g, '{}', CASE WHEN g % 3 = 0 THEN 'running' ELSE 'ready' END,
               3, $2::bigint, $2::bigint, $2::bigint, $2::bigint
          FROM generate_series(1, $1::int) AS g
        """,
        LIVE,
        now,
    )
    await sql.execute(
        """
        INSERT INTO mcp_jobs.steps (run_id, name, job_id, status, started_at)
        SELECT 'r1', 's' || g, '000000000001', 'completed', g FROM generate_series(1, $1::int) g
        """,
        STEPS,
    )
    await sql.execute(
        """
        INSERT INTO mcp_jobs.events (job_id, at, kind)
        SELECT '000000000001', g, 'note' FROM generate_series(1, $1::int) g
        """,
        STEPS,
    )
    await sql.execute("VACUUM ANALYZE mcp_jobs.jobs")
    await sql.execute("VACUUM ANALYZE mcp_jobs.steps")
    await sql.execute("VACUUM ANALYZE mcp_jobs.events")
    return driver


def _walk(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("Plans", []):
        found += _walk(child)
    return found


async def _explain(sql: Conn, query: str, *args: object) -> tuple[int, set[str], list[str]]:
    """(shared buffers touched, indexes used, relations scanned sequentially)."""
    raw = await sql.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {query}", *args)
    (plan,) = json.loads(raw)
    root = plan["Plan"]
    nodes = _walk(root)
    buffers = root.get("Shared Hit Blocks", 0) + root.get("Shared Read Blocks", 0)
    indexes = {n["Index Name"] for n in nodes if "Index Name" in n}
    seq = [n["Relation Name"] for n in nodes if n["Node Type"] == "Seq Scan"]
    return buffers, indexes, seq


async def test_stats_read_the_live_rows_and_the_settled_index(
    history: PostgresDriver, sql: Conn, clock: ManualClock
) -> None:
    now = clock.now_ms()
    for queues, tenant in ((None, None), (["default"], None), (None, "t0")):
        buffers, indexes, seq = await _explain(
            sql, history.db.q["stats"], *stats_args(now, queues, tenant)
        )
        # dead_counts is one row per queue, tenant and state: a scan of it is O(queues).
        assert [r for r in seq if r != "dead_counts"] == [], (queues, tenant)
        assert {"jobs_live_idx", "jobs_settled_idx", "jobs_unknown_state_idx"} <= indexes
        assert buffers < MAX_BUFFERS, (queues, tenant, buffers)
    (stats,) = await history.stats()
    assert (stats.done, stats.dead, stats.ready + stats.running) == (0, DEAD, LIVE)


@pytest.mark.parametrize(
    "settings", [GENERIC, PLANNED_ONCE_SETTINGS], ids=["pooled", "planned-once"]
)
async def test_stats_planned_generically_expect_the_recent_settled_rows_few(
    history: PostgresDriver, sql: Conn, clock: ManualClock, settings: dict[str, str]
) -> None:
    """The stats run planned once (below), and a pooled connection's prepared statement may
    switch to a generic plan (PostgreSQL does after five runs when it looks no dearer). Not
    knowing the window's start, that plan must still expect few recent settled rows: expecting
    a third of all history, it planned parallel workers over the settled index, which cost
    several times the whole read."""
    now = clock.now_ms()
    for queues, tenant in ((None, None), (["default"], None), (None, "t0")):
        plan = await generic_plan(
            sql, history.db.q["stats"], None, *stats_args(now, queues, tenant), settings=settings
        )
        nodes = _walk(plan)
        settled = [n["Plan Rows"] for n in nodes if n.get("Index Name") == "jobs_settled_idx"]
        assert settled, (queues, tenant)
        assert max(settled) < SETTLED // 50, (queues, tenant, settled)
        parallel = [
            n["Node Type"] for n in nodes if n.get("Parallel Aware") or "Gather" in n["Node Type"]
        ]
        assert parallel == [], (queues, tenant)
        assert plan.get("Shared Hit Blocks", 0) < MAX_BUFFERS, (queues, tenant)


async def test_stats_are_planned_once(history: PostgresDriver) -> None:
    """Planning the stats costs about a tenth of the read at a million rows, and its generic
    plan is right for any arguments (above): it runs on the connections that keep one plan."""
    for _ in range(3):
        for queues, tenant in ((None, None), (["default"], None), (None, "t0")):
            await history.stats(queues, tenant_id=tenant)
    plans: list[tuple[bool, int, int]] = []
    for conn in history.db.general.all | history.db.generic.all:
        found = await conn.fetch(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%' || $1 || '%'",
            "by_state",
        )
        own = conn in history.db.generic.all
        plans += [(own, row["generic_plans"], row["custom_plans"]) for row in found]
    assert plans and all(own and custom == 0 for own, _, custom in plans), plans
    assert sum(generic for _, generic, _ in plans) == 9


@pytest.mark.parametrize(
    "filter",
    [
        JobFilter(states=("dead",)),
        JobFilter(states=("failed",)),  # matches nothing
        JobFilter(states=("ready",)),
        JobFilter(states=("done", "dead")),
        JobFilter(name="hist1"),
        JobFilter(name="nosuch"),
        JobFilter(queue="default"),
        JobFilter(queue="nosuch"),
        JobFilter(tenant_id="t1"),
        JobFilter(tenant_id="nosuch"),
        JobFilter(states=("dead",), name="hist1"),  # matches nothing
        JobFilter(states=("done",), tenant_id="t0"),
        JobFilter(name="hist0", tenant_id="t0", cursor="000000030000"),
        JobFilter(states=("cancelled",), queue="default"),
    ],
    ids=repr,
)
async def test_each_list_filter_costs_the_page(
    history: PostgresDriver, sql: Conn, filter: JobFilter
) -> None:
    text, args = list_sql(filter)
    buffers, indexes, seq = await _explain(sql, with_schema(text, "mcp_jobs"), *args)
    assert seq == []
    # The settled side reads its partial index, or the primary key backwards when the filter
    # matches densely (the page fills at once); the buffer bound holds either way.
    if set(filter.states or SETTLED_STATES) & set(SETTLED_STATES):
        assert indexes & (SETTLED_LIST_INDEXES | {"jobs_pkey"}), indexes
    assert buffers < MAX_BUFFERS, (buffers, indexes)


@pytest.mark.parametrize("own", [True, False], ids=["its own connection", "beyond them"])
async def test_a_list_stays_planned_for_its_values(history: PostgresDriver, own: bool) -> None:
    """On a cached statement the server switches to one generic plan after five runs when that
    looks no dearer; for this history (two names share every settled row) that plan walks the
    primary key through all of it to find a name no row has (1,569 buffers, more than the
    table). A list is planned for its values every time: on the connections that plan so, and
    beyond them with its statement prepared anew."""
    if not own:
        history.db.for_values.limit = 0  # every list goes where a busy set sends it
    for _ in range(4):
        for name in ("hist0", "hist1", "nosuch"):
            await history.list_jobs(JobFilter(name=name))
    assert bool(history.db.for_values.all) == own
    generic: list[str] = []
    for conn in history.db.general.all | history.db.for_values.all:
        found = await conn.fetch(
            "SELECT statement FROM pg_prepared_statements"
            " WHERE generic_plans > 0 AND statement LIKE '%' || $1 || '%'",
            "UNION ALL",
        )
        generic += [row["statement"] for row in found]
    assert generic == []


async def test_an_unfiltered_list_walks_the_primary_key(history: PostgresDriver, sql: Conn) -> None:
    buffers, indexes, seq = await _explain(sql, history.db.q["list_jobs"], None, 51)
    assert (seq, indexes) == ([], {"jobs_pkey"}) and buffers < MAX_BUFFERS


async def test_a_trace_page_reads_the_page_not_the_run(history: PostgresDriver, sql: Conn) -> None:
    q = history.db.q
    for query, args in (
        (q["trace_steps_newest"], ("r1", 51)),
        (q["trace_steps_before"], ("r1", 2_500, 10**9, 51)),
        (q["trace_events_newest"], ("000000000001", 51)),
        (q["trace_events_before"], ("000000000001", 2_500, 51)),
    ):
        buffers, indexes, seq = await _explain(sql, query, *args)
        assert seq == [] and buffers < 20, (query, buffers, indexes)
    trace = await history.load_trace("000000000001")
    assert (len(trace.steps), trace.steps_total, trace.events_total) == (50, STEPS, STEPS)


# Live rows enough to fill many pages, with the newest ids: where a new job's row lands.
LIVE_ON_TOP = 5_000


@pytest.fixture
async def live_on_top(history: PostgresDriver, sql: Conn, clock: ManualClock) -> PostgresDriver:
    now = clock.now_ms()
    await sql.execute(
        """
        INSERT INTO mcp_jobs.jobs (id, run_id, name, queue, tenant_id, idempotency_key, input,
            state, max_attempts, run_at, queued_at, created_at, updated_at)
        SELECT 'zz' || lpad(g::text, 10, '0'), 'top' || g, 'hist0', 'default', 't0',
               'top' || g, '{}', 'ready', 3, $2::bigint, $2::bigint, $2::bigint, $2::bigint
          FROM generate_series(1, $1::int) AS g
        """,
        LIVE_ON_TOP,
        now,
    )
    await sql.execute("VACUUM ANALYZE mcp_jobs.jobs")
    return history


@pytest.mark.parametrize(
    "filter",
    [
        # Filters no live row matches: the live side reads the live rows, not the history.
        JobFilter(name="hist1"),
        JobFilter(tenant_id="t1"),
        # Past the live rows: the page after the oldest of them holds settled rows only.
        JobFilter(name="hist0", cursor="z00000000001"),
        JobFilter(queue="default", cursor="z00000000001"),
    ],
    ids=repr,
)
async def test_a_list_page_is_not_found_through_the_live_rows(
    live_on_top: PostgresDriver, sql: Conn, filter: JobFilter
) -> None:
    """Many live rows hold the newest ids. A filter with no live row among them, or a page past
    the oldest of them, once walked the primary key back through the whole history (1,830 and
    1,573 buffers here); the live side now reads at most the live rows."""
    text, args = list_sql(filter)
    buffers, indexes, seq = await _explain(sql, with_schema(text, "mcp_jobs"), *args)
    # A walk of the history reads every page of the table (1,830 buffers here before); the
    # live rows fill a tenth of it.
    table_pages = await sql.fetchval("SELECT relpages FROM pg_class WHERE relname = 'jobs'")
    assert seq == []
    assert buffers < table_pages // 2, (buffers, table_pages, indexes)
    page = await live_on_top.list_jobs(filter)
    assert len(page.jobs) == filter.limit and page.next_cursor is not None


async def test_a_second_filter_is_tested_on_the_index_entry(
    history: PostgresDriver, sql: Conn
) -> None:
    """Two filters, each common, that no row has together: the list walks the leading filter's
    settled entries, and each filter's index carries the others, so no row is read to test
    them (without that, 2.6 s for a tenant of 100,000 rows, cold). The planner is held to
    index-only walks, which it costs by how much of the table VACUUM has seen all-visible, and
    that depends on what else runs on the server."""
    index = {"name": "name", "queue": "queue", "tenant_id": "tenant"}
    for leading, other in (("name", "tenant_id"), ("queue", "name"), ("tenant_id", "queue")):
        text, args = list_sql(JobFilter(**{leading: "nosuch", other: "x"}))
        async with sql.transaction():
            for kind in ("seqscan", "indexscan", "bitmapscan"):
                await sql.execute(f"SET LOCAL enable_{kind} = off")
            raw = await sql.fetchval(
                f"EXPLAIN (FORMAT JSON) {with_schema(text, 'mcp_jobs')}", *args
            )
        (plan,) = json.loads(raw)
        # A state with few rows may be walked on jobs_settled_state_idx instead (ci197); the
        # two filters' own indexes, wherever they serve, are walked index-only.
        ours = {f"jobs_settled_{index[leading]}_idx", f"jobs_settled_{index[other]}_idx"}
        walks = [n for n in _walk(plan["Plan"]) if n.get("Index Name") in ours]
        assert walks and {n["Node Type"] for n in walks} == {"Index Only Scan"}, (leading, walks)
