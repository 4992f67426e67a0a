"""The one install point (rule 10): migrations from nothing equal the declared schema, migrate is
idempotent and safe when several processes run it at once, and every named query fits it."""

from __future__ import annotations

from typing import Any

import anyio
import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.sql import latest_version, migrations
from engine.errors import JobsError
from tests.postgres.builders import request
from tests.support.postgres import fresh_database

TABLES = {
    "backfills",
    "dead_counts",
    "descriptors",
    "events",
    "jobs",
    "outbox",
    "pauses",
    "rate_limits",  # engine/rate_limits.py
    "rate_reservations",
    "inbound_events",  # engine/inbound_events.py
    "inbound_event_waiters",
    "reruns",  # engine/reruns.py
    "scheduler_leader",  # read by none of this version; kept for earlier ones (schema.sql)
    "leaders",
    "scheduler_state",
    "schema_version",
    "slots",
    "steps",
    "workers",
}


async def catalog(url: str, schema: str = "mcp_jobs") -> dict[str, Any]:
    """Everything about `schema` that a migration can change, in a comparable form."""
    conn: asyncpg.Connection[asyncpg.Record] = await asyncpg.connect(url)
    try:
        relations = await conn.fetch(
            "SELECT c.relname, c.relkind::text, coalesce(c.reloptions, '{}')::text FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1",
            schema,
        )
        columns = await conn.fetch(
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,"
            "       pg_get_expr(d.adbin, d.adrelid), a.attidentity, coll.collname,"
            "       a.attstattarget"
            "  FROM pg_attribute a"
            "  JOIN pg_class c ON c.oid = a.attrelid"
            "  JOIN pg_namespace n ON n.oid = c.relnamespace"
            "  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
            "  LEFT JOIN pg_collation coll ON coll.oid = a.attcollation"
            " WHERE n.nspname = $1 AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped",
            schema,
        )
        indexes = await conn.fetch(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1", schema
        )
        constraints = await conn.fetch(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)"
            "  FROM pg_constraint WHERE connamespace = $1::regnamespace",
            schema,
        )
        functions = await conn.fetch(
            "SELECT proname, pg_get_functiondef(oid) FROM pg_proc"
            " WHERE pronamespace = $1::regnamespace",
            schema,
        )
        sequences = await conn.fetch(
            "SELECT sequencename, data_type::text, start_value, increment_by"
            "  FROM pg_sequences WHERE schemaname = $1",
            schema,
        )
        versions = await conn.fetch(
            f'SELECT version, name FROM "{schema}".schema_version ORDER BY version'
        )
    finally:
        await conn.close()
    return {
        "relations": sorted(tuple(r) for r in relations),
        "columns": sorted(tuple(r) for r in columns),
        "indexes": sorted(tuple(r) for r in indexes),
        "constraints": sorted(tuple(r) for r in constraints),
        "functions": sorted(tuple(r) for r in functions),
        "sequences": sorted(tuple(r) for r in sequences),
        "versions": [tuple(r) for r in versions],
    }


async def test_migrations_from_nothing_equal_the_declared_schema(clock: ManualClock) -> None:
    async with (
        fresh_database(migrated=False) as by_migrations,
        fresh_database(migrated=False) as by_schema,
    ):
        a = PostgresDriver(by_migrations, clock=clock, listen=False)
        b = PostgresDriver(by_schema, clock=clock, listen=False)
        try:
            assert await a.migrate_with("migrations") == [m.version for m in migrations()]
            assert await b.migrate_with("schema") == [m.version for m in migrations()]
        finally:
            await a.close()
            await b.close()
        migrated = await catalog(by_migrations)
        declared = await catalog(by_schema)
    assert {name for name, kind, _ in declared["relations"] if kind == "r"} == TABLES
    # Both roads leave the queue table with its early, unthrottled autovacuum.
    (jobs_options,) = [o for name, _, o in declared["relations"] if name == "jobs"]
    assert "autovacuum_vacuum_cost_delay=0" in jobs_options
    assert declared["versions"][-1][0] == latest_version()
    for part in declared:
        assert migrated[part] == declared[part], part


async def test_migrate_twice_changes_nothing(clock: ManualClock) -> None:
    async with fresh_database(migrated=False) as url:
        driver = PostgresDriver(url, clock=clock, listen=False)
        try:
            assert await driver.migrate_with() == [m.version for m in migrations()]
            before = await catalog(url)
            assert await driver.migrate_with() == []
            assert await catalog(url) == before
        finally:
            await driver.close()


async def test_processes_migrating_at_once_install_once(clock: ManualClock) -> None:
    async with fresh_database(migrated=False) as url:
        drivers = [PostgresDriver(url, clock=clock, listen=False) for _ in range(4)]
        applied: list[list[int]] = []
        try:
            async with anyio.create_task_group() as tg:

                async def run(d: PostgresDriver) -> None:
                    applied.append(await d.migrate_with())

                for d in drivers:
                    tg.start_soon(run, d)
        finally:
            for d in drivers:
                await d.close()
        # The advisory lock queued them: exactly one did the work, the rest found it done.
        assert sorted(applied, key=len) == [[], [], [], [m.version for m in migrations()]]
        assert [v for v, _ in (await catalog(url))["versions"]] == [m.version for m in migrations()]


async def test_a_second_schema_in_one_database_is_its_own_world(clock: ManualClock) -> None:
    async with fresh_database(migrated=False) as url:
        one = PostgresDriver(url, clock=clock, listen=False)
        other = PostgresDriver(url, clock=clock, listen=False, schema="tenant_two")
        try:
            await one.migrate()
            await other.migrate()
            now = clock.now_ms()
            a = await one.enqueue([request(now, key="same")])
            b = await other.enqueue([request(now, key="same")])
            assert not a[0].deduped and not b[0].deduped
            assert [c.record.id for c in await other.claim("w", 10, 1000)] == [b[0].id]
            assert [c.record.id for c in await one.claim("w", 10, 1000)] == [a[0].id]
        finally:
            await one.close()
            await other.close()
        assert {
            n for n, k, _ in (await catalog(url, "tenant_two"))["relations"] if k == "r"
        } == TABLES


@pytest.mark.parametrize("schema", ["", "Upper", "9lives", "semi;colon", 'quo"te', "x" * 59])
def test_a_schema_name_that_is_not_a_plain_identifier_is_refused(schema: str) -> None:
    with pytest.raises(JobsError) as raised:
        PostgresDriver("postgresql://nobody@127.0.0.1/none", schema=schema)
    assert raised.value.code == "INVALID_ARGUMENT"


async def test_every_named_query_prepares_against_the_schema(
    driver: PostgresDriver, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    assert len(driver.db.q) > 30
    for name, text in driver.db.q.items():
        try:
            await sql.prepare(text)
        except asyncpg.PostgresError as exc:  # pragma: no cover - the message is the point
            pytest.fail(f"query {name!r} does not prepare: {exc}")
