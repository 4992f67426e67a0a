"""EXPLAIN ANALYZE of a statement's generic plan: the plan a connection that plans each
statement once (Connections.planned_once) runs, or one the server switched to."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeAlias

import asyncpg

Conn: TypeAlias = "asyncpg.Connection[asyncpg.Record]"


def literal(value: Any) -> str:
    """A test's own argument as SQL text (EXPLAIN EXECUTE takes no parameters)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return "ARRAY[" + ", ".join(literal(v) for v in value) + "]::text[]"


GENERIC = {"plan_cache_mode": "force_generic_plan"}


@asynccontextmanager
async def prepared(
    sql: Conn, query: str, types: str | None, settings: Mapping[str, str] = GENERIC
) -> AsyncIterator[Callable[..., Awaitable[dict[str, Any]]]]:
    """`query` prepared under `settings` (by default, a generic plan and nothing else: a
    pooled connection's statement the server switched to one plan); inside, `explain(*args)`
    runs EXPLAIN (ANALYZE, BUFFERS) of that prepared plan with `args`, rolled back. The plan is
    made at the first `explain` and kept, as a connection keeps it."""
    for name, value in settings.items():
        await sql.execute(f"SET {name} = {literal(value)}")
    await sql.execute(f"PREPARE probe {f'({types}) ' if types else ''}AS {query}")

    async def explain(*args: Any) -> dict[str, Any]:
        values = ", ".join(literal(arg) for arg in args)
        probing = sql.transaction()
        await probing.start()
        try:
            text = await sql.fetchval(
                f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE probe ({values})"
            )
        finally:
            await probing.rollback()  # a claim it ran leases nothing
        plan: dict[str, Any] = json.loads(text)[0]["Plan"]
        return plan

    try:
        yield explain
    finally:
        await sql.execute("DEALLOCATE probe")
        for name in settings:
            await sql.execute(f"RESET {name}")


async def generic_plan(
    sql: Conn, query: str, types: str | None, *args: Any, settings: Mapping[str, str] = GENERIC
) -> dict[str, Any]:
    """EXPLAIN (ANALYZE, BUFFERS) of `query`'s generic plan run with `args`, rolled back.
    `types`: the parameters' types when the statement does not cast them itself."""
    async with prepared(sql, query, types, settings) as explain:
        return await explain(*args)


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of `plan`, itself first."""
    return [plan, *(n for child in plan.get("Plans", []) for n in nodes(child))]


async def assert_a_batch_reads_its_rows(
    sql: Conn, table: str, query: str, index: str, *args: Any, max_buffers: int
) -> None:
    """A delete batch's generic plan walks `index` and reads fewer than `max_buffers` pages,
    on a `table` (freshly analysed) more than twice that big, so a scan of it could not pass."""
    await sql.execute(f"VACUUM ANALYZE {table}")
    pages = await sql.fetchval(f"SELECT relpages FROM pg_class WHERE oid = '{table}'::regclass")
    assert pages > 2 * max_buffers
    plan = await generic_plan(sql, query, None, *args)
    found = nodes(plan)
    assert "Seq Scan" not in {n["Node Type"] for n in found}, found
    assert index in {n.get("Index Name") for n in found}
    buffers = plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)
    assert buffers < max_buffers, buffers
