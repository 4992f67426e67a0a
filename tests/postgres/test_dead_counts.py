"""The dead and failed counts (migration 7): triggers keep `dead_counts` equal to a count of the
jobs table through every way a row enters or leaves dead/failed, the migration counts the rows
that were there before it, and the stats read the counts instead of the settled index."""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import anyio
import asyncpg

from engine import ManualClock
from engine.drivers.base import AckWrite
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.jobs import stats_args
from engine.drivers.postgres.sql import latest_version, migrations, with_schema
from engine.errors import JobsError
from engine.retention import Cutoffs, PruneRule
from schemas.jobs import NackOptions
from schemas.states import SETTLED_STATES
from tests.postgres.builders import failure, request
from tests.postgres.conftest import DriverFactory
from tests.postgres.waiting import eventually

Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record]"
Counts = dict[tuple[str, str, str], int]
# What the stats read from the counts table, and what they must equal.
# Every row: a count that reaches 0 is deleted, so the table holds only groups with failures.
COUNTS = "SELECT queue, tenant_id, state, n FROM mcp_jobs.dead_counts"
TRUTH = (
    "SELECT queue, coalesce(tenant_id, ''), state, count(*) FROM mcp_jobs.jobs"
    " WHERE state IN ('dead', 'failed') GROUP BY 1, 2, 3"
)


def as_counts(rows: Any) -> Counts:
    return {(r[0], r[1], r[2]): int(r[3]) for r in rows}


async def random_operations(
    driver: Any, clock: ManualClock, seed: int, rounds: int, live_ids: Callable[[], Awaitable[Any]]
) -> None:
    """Enqueue, claim, settle every way (done, dead, failed, retry later, cancel while running),
    retry dead and failed rows, cancel waiting rows and prune, across queues and tenants. Shared
    with tests/sqlite/test_dead_counts.py. `live_ids()` answers [(id, state, tenant)] of the
    table, read outside the driver."""
    rng = random.Random(seed)
    serial = 0
    for _ in range(rounds):
        now = clock.now_ms()
        batch = []
        for _ in range(rng.randint(1, 6)):
            serial += 1
            batch.append(
                request(
                    now,
                    key=f"k{seed}-{serial}",
                    queue=rng.choice(["q1", "q2", "q3"]),
                    tenant_id=rng.choice([None, "t1", "t2"]),
                    run_at=now + rng.choice([0, 0, 0, 5]),
                )
            )
        await driver.enqueue(batch)
        for claimed in await driver.claim("w", rng.randint(0, 8), 60_000):
            job, token = claimed.record, claimed.token
            move = rng.choice(["done", "dead", "dead", "failed", "failed", "again", "cancel"])
            if move == "done":
                await driver.ack_many([AckWrite(job.id, token, {"ok": True})])
            elif move == "cancel":
                await driver.cancel(job.id, job.tenant_id, "test")
            else:
                options = NackOptions(
                    error=failure(), dead_letter=move == "dead", fail=move == "failed"
                )
                await driver.nack(job.id, token, options)
        rows = list(await live_ids())
        for job_id, state, tenant in rng.sample(rows, min(len(rows), 3)):
            try:
                if state in ("dead", "failed") and rng.random() < 0.5:
                    await driver.retry(job_id, tenant, False, "test")
                elif state in ("ready", "delayed") and rng.random() < 0.2:
                    await driver.cancel(job_id, tenant, "test")
            except JobsError:
                pass  # a duplicate key or a state another move changed first
        clock.advance(3)
        if rng.random() < 0.3:
            cutoff = clock.now_ms() - rng.randint(0, 6)
            states = rng.sample(list(SETTLED_STATES), rng.randint(1, len(SETTLED_STATES)))
            cutoffs = Cutoffs(rules=tuple(PruneRule(s, cutoff) for s in states))
            await driver.prune(cutoffs, rng.randint(1, 10), rng.choice([None, "t1"]))


async def test_the_counts_follow_every_operation(
    driver: PostgresDriver, sql: Conn, clock: ManualClock
) -> None:
    async def rows() -> Any:
        return await sql.fetch("SELECT id, state, tenant_id FROM mcp_jobs.jobs ORDER BY id")

    for seed in range(4):
        await random_operations(driver, clock, seed, 40, rows)
        truth = as_counts(await sql.fetch(TRUTH))
        assert as_counts(await sql.fetch(COUNTS)) == truth, seed
    assert {state for _, _, state in truth} == {"dead", "failed"}
    assert len({tenant for _, tenant, _ in truth}) == 3
    assert await sql.fetchval("SELECT count(*) FROM mcp_jobs.dead_counts WHERE n < 0") == 0
    # And the stats answer them, per queue and per tenant.
    for tenant in (None, "t1"):
        got = {s.queue: [s.dead, s.failed] for s in await driver.stats(tenant_id=tenant)}
        expected: dict[str, list[int]] = {}
        for (queue, t, state), n in truth.items():
            if tenant is None or t == tenant:
                expected.setdefault(queue, [0, 0])[0 if state == "dead" else 1] += n
        assert {k: v for k, v in got.items() if v != [0, 0]} == expected


async def install_up_to(sql: Conn, version: int) -> None:
    """The schema as it stood at `version`: migrations 1..version only, recorded as applied."""
    await sql.execute("DROP SCHEMA mcp_jobs CASCADE")
    first = [m for m in migrations() if m.version <= version]
    for migration in first:
        await sql.execute(with_schema(migration.text, "mcp_jobs"))
    await sql.executemany(
        "INSERT INTO mcp_jobs.schema_version (version, name, applied_at) VALUES ($1, $2, 0)",
        [(m.version, m.name) for m in first],
    )


async def test_the_migration_counts_the_rows_already_there(
    driver: PostgresDriver, sql: Conn, clock: ManualClock
) -> None:
    """The schema at version 6 (migrations 1-6 only), rows written, then migrated to the end."""
    await install_up_to(sql, 6)
    now = clock.now_ms()
    await sql.execute(
        """
        INSERT INTO mcp_jobs.jobs (id, run_id, name, queue, tenant_id, idempotency_key, input,
            state, max_attempts, run_at, queued_at, created_at, updated_at, finished_at)
        SELECT lpad(g::text, 12, '0'), 'r' || g, 'old', 'q' || (g % 3),
               CASE WHEN g % 4 = 0 THEN NULL ELSE 't' || (g % 2) END, 'k' || g, '{}',
               (ARRAY['dead', 'failed', 'done', 'ready', 'cancelled'])[1 + g % 5],
               3, $1::bigint, $1::bigint, $1::bigint, $1::bigint, $1::bigint
          FROM generate_series(1, 500) AS g
        """,
        now,
    )
    assert await driver.migrate_with("migrations") == list(range(7, latest_version() + 1))
    truth = as_counts(await sql.fetch(TRUTH))
    assert sum(truth.values()) == 200
    assert as_counts(await sql.fetch(COUNTS)) == truth
    # The triggers it made keep them from there.
    (claimed,) = await driver.claim("w", 1, 60_000)
    await driver.nack(claimed.record.id, claimed.token, NackOptions(dead_letter=True))
    assert as_counts(await sql.fetch(COUNTS)) == as_counts(await sql.fetch(TRUTH))


async def test_the_hot_path_never_calls_the_trigger_function(
    driver: PostgresDriver, sql: Conn, clock: ManualClock
) -> None:
    """Enqueue, claim and ack: the WHEN conditions hold the function back (pg_stat_user_functions
    counts its calls once track_functions is on)."""
    await sql.execute("SET track_functions = 'pl'")
    await driver.enqueue([request(clock.now_ms(), key=f"hot{i}") for i in range(20)])
    for claimed in await driver.claim("w", 20, 60_000):
        await driver.ack_many([AckWrite(claimed.record.id, claimed.token, None)])
    await sql.execute("UPDATE mcp_jobs.jobs SET state = 'done' WHERE false")
    calls = await sql.fetchval(
        "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions"
        " WHERE schemaname = 'mcp_jobs' AND funcname = 'keep_dead_counts'"
    )
    assert calls == 0
    triggers = await sql.fetch(
        "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger"
        " WHERE tgrelid = 'mcp_jobs.jobs'::regclass AND NOT tgisinternal"
    )
    # Every row trigger holds the function back with WHEN; TRUNCATE's fires once a statement.
    row_triggers = [d for _, d in triggers if "FOR EACH ROW" in d]
    assert row_triggers and all(" WHEN " in definition for definition in row_triggers)
    assert all("AFTER TRUNCATE" in d for _, d in triggers if "FOR EACH ROW" not in d)
    assert {name for name, _ in triggers} >= {
        "dead_counts_insert",
        "dead_counts_update",
        "dead_counts_delete",
        "dead_counts_truncate",
    }


DEAD = 50_000


def _walk(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("Plans", []):
        found += _walk(child)
    return found


async def test_the_stats_read_the_counts_not_the_dead_rows(
    driver: PostgresDriver, sql: Conn, clock: ManualClock
) -> None:
    now = clock.now_ms()
    old = now - 30 * 86_400_000
    await sql.execute(
        """
        INSERT INTO mcp_jobs.jobs (id, run_id, name, queue, tenant_id, idempotency_key, input,
            state, max_attempts, run_at, queued_at, created_at, updated_at, finished_at)
        SELECT lpad(g::text, 12, '0'), 'r' || g, 'old', 'default', 't' || (g % 2), 'k' || g,
               '{}', CASE WHEN g % 2 = 0 THEN 'dead' ELSE 'failed' END,
               3, $2::bigint, $2::bigint, $2::bigint, $2::bigint, $2::bigint + g
          FROM generate_series(1, $1::int) AS g
        """,
        DEAD,
        old,
    )
    await sql.execute("VACUUM ANALYZE mcp_jobs.jobs")
    # One statement of 50,000 transitions leaves as many versions of the same few counts rows;
    # a queue's churn (one transition per transaction) is pruned page by page as it goes. Compact
    # them, so what is measured below is what the stats read of the jobs table.
    await sql.execute("VACUUM FULL ANALYZE mcp_jobs.dead_counts")
    for queues, tenant in ((None, None), (["default"], None), (None, "t0")):
        raw = await sql.fetchval(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {driver.db.q['stats']}",
            *stats_args(now, queues, tenant),
        )
        (plan,) = json.loads(raw)
        root = plan["Plan"]
        buffers = root.get("Shared Hit Blocks", 0) + root.get("Shared Read Blocks", 0)
        # Reading the dead rows from the settled index alone touches hundreds of pages.
        assert buffers < 40, (queues, tenant, buffers)
        assert "dead_counts" in raw
        for node in _walk(root):  # no settled index is searched for dead or failed rows
            if node.get("Index Name", "").startswith("jobs_settled"):
                condition = node.get("Index Cond", "") + node.get("Filter", "")
                assert "dead" not in condition and "failed" not in condition, node
    (stats,) = await driver.stats()
    assert (stats.dead, stats.failed) == (DEAD // 2, DEAD // 2)
    (pinned,) = await driver.stats(tenant_id="t0")
    assert (pinned.dead, pinned.failed) == (DEAD // 2, 0)


async def test_the_migration_to_version_18_deletes_the_counts_of_zero(
    driver: PostgresDriver, sql: Conn
) -> None:
    """The stats read every row of the counts table, so a group whose failures were all retried
    or pruned must leave it (the random test above checks the trigger); rows of 0 an earlier
    version kept go with migration 18."""
    await install_up_to(sql, 17)
    await sql.execute(
        "INSERT INTO mcp_jobs.dead_counts SELECT 'q', 't' || g, s, 0"
        " FROM generate_series(1, 50) AS g, (VALUES ('dead'), ('failed')) AS v (s)"
    )
    assert await driver.migrate_with("migrations") == list(range(18, latest_version() + 1))
    assert await sql.fetchval("SELECT count(*) FROM mcp_jobs.dead_counts") == 0


async def _dead(driver: PostgresDriver, clock: ManualClock, name: str, queue: str) -> None:
    """One dead job of `name` in `queue`, finished a millisecond after the one before."""
    clock.advance(1)
    await driver.enqueue([request(clock.now_ms(), name=name, key=f"{name}-{queue}", queue=queue)])
    (claimed,) = await driver.claim("w", 1, 60_000)
    clock.advance(1)
    options = NackOptions(error=failure(), dead_letter=True)
    await driver.nack(claimed.record.id, claimed.token, options)


async def test_prunes_meeting_the_same_counts_in_opposite_orders_both_commit(
    make_driver: DriverFactory, pg_url: str, sql: Conn, clock: ManualClock
) -> None:
    """Each deleted dead row moves its group's count: two prunes (the worker's pass beside a
    prune_history call) whose rows meet the counts in opposite orders, a -> c -> b and
    b -> c -> a, both held at c until both wait, then let go: neither is aborted."""
    first, second = await make_driver(listen=False), await make_driver(listen=False)
    for name, queues in (("x", "acb"), ("y", "bca")):
        for queue in queues:
            await _dead(first, clock, name, queue)
    clock.advance(1)
    cutoff = clock.now_ms()

    def only(name: str) -> Cutoffs:
        return Cutoffs(rules=(PruneRule("dead", cutoff, name),), named=(name,))

    watcher: Conn = await asyncpg.connect(pg_url)
    held = sql.transaction()
    await held.start()
    await sql.execute("SELECT FROM mcp_jobs.dead_counts WHERE queue = 'c' FOR UPDATE")
    outcomes: list[object] = []

    async def prune(driver: PostgresDriver, cutoffs: Cutoffs) -> None:
        try:
            outcomes.append(sum(c.rows for c in await driver.prune(cutoffs, 10)))
        except JobsError as exc:
            outcomes.append(exc.code)

    async def both_waiting() -> bool:
        waiting: int = await watcher.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND application_name = 'mcp-jobs'"
        )
        return waiting == 2

    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(prune, first, only("x"))
                tg.start_soon(prune, second, only("y"))
                await eventually(both_waiting)
                await held.rollback()
    finally:
        await watcher.close()
    assert outcomes == [3, 3]
    assert as_counts(await sql.fetch(COUNTS)) == {}


async def test_a_truncate_of_the_jobs_table_clears_the_counts(
    driver: PostgresDriver, sql: Conn, clock: ManualClock
) -> None:
    """TRUNCATE fires no row trigger: the stats showed the dead jobs it removed for ever."""

    async def rows() -> Any:
        return await sql.fetch("SELECT id, state, tenant_id FROM mcp_jobs.jobs ORDER BY id")

    await random_operations(driver, clock, 7, 20, rows)
    assert as_counts(await sql.fetch(COUNTS))  # some failures are counted
    await sql.execute("TRUNCATE mcp_jobs.jobs CASCADE")
    assert as_counts(await sql.fetch(COUNTS)) == {} == as_counts(await sql.fetch(TRUTH))
    assert all(q.dead == q.failed == 0 for q in await driver.stats())
    await random_operations(driver, clock, 8, 20, rows)  # counted from nothing again
    assert as_counts(await sql.fetch(COUNTS)) == as_counts(await sql.fetch(TRUTH))
