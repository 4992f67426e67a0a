"""Rule 2 in SQL: the unique index, the ON CONFLICT target and the live-row lookup agree.

The three are pinned twice: by their text (each spells the same key and the same live states,
which are the runtime LIVE_STATES) and by behaviour on a real server (Postgres refuses a conflict
target that does not match an index, and a lookup that is narrower than the index answers with
a stranger's row).
"""

from __future__ import annotations

import re

import asyncpg
import pytest

from engine import ManualClock
from engine.drivers.postgres import PostgresDriver
from engine.drivers.postgres.sql import raw_queries, raw_schema
from engine.errors import JobsError
from engine.settle import Settler
from schemas.states import LIVE_STATES
from tests.postgres.builders import request

KEY = "idempotency_key, name, (coalesce(tenant_id, ''))"
LIVE = "state IN (" + ", ".join(f"'{s}'" for s in LIVE_STATES) + ")"


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_index_conflict_target_and_lookup_spell_one_key_over_the_live_states() -> None:
    schema = squash(raw_schema())
    index = re.search(
        r"CREATE UNIQUE INDEX jobs_dedupe_live_idx ON \{schema\}\.jobs (.*?);", schema
    )
    assert index is not None
    assert index[1] == f"({KEY}) WHERE {LIVE}"

    enqueue = squash(raw_queries()["enqueue"])
    assert f"ON CONFLICT ({KEY}) WHERE {LIVE} DO NOTHING" in enqueue
    # The single-item road inserts under the same conflict target.
    assert f"ON CONFLICT ({KEY}) WHERE {LIVE} DO NOTHING" in squash(raw_queries()["enqueue_one"])

    lookup = (
        "live.name = {o}.name"
        " AND coalesce(live.tenant_id, '') = coalesce({o}.tenant_id, '')"
        " AND live.idempotency_key = {o}.idempotency_key"
        f" AND live.{LIVE}"
    )
    assert lookup.format(o="r") in squash(raw_queries()["enqueue_holders"])
    assert lookup.format(o="target") in squash(raw_queries()["retry"])
    # The claim and the stats read the same vocabulary: no live state is forgotten anywhere.
    assert "state IN ('ready', 'delayed', 'suspended')" in squash(raw_queries()["claim"])


async def test_the_dedupe_index_is_the_only_unique_key_besides_the_id(
    driver: PostgresDriver, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    # A superseded, narrower index left beside it would keep enforcing the old collision.
    unique = await sql.fetch(
        "SELECT indexname, indexdef FROM pg_indexes"
        " WHERE schemaname = 'mcp_jobs' AND tablename = 'jobs' AND indexdef LIKE 'CREATE UNIQUE%'"
    )
    assert sorted(r["indexname"] for r in unique) == ["jobs_dedupe_live_idx", "jobs_pkey"]
    (live,) = [r["indexdef"] for r in unique if r["indexname"] == "jobs_dedupe_live_idx"]
    assert "(idempotency_key, name, COALESCE(tenant_id, ''::text))" in live


async def test_the_three_together_decide_who_dedupes(
    driver: PostgresDriver,
    settler: Settler,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
) -> None:
    now = clock.now_ms()
    # Tenant A and tenant B with one key: two jobs.
    a, b = await driver.enqueue(
        [request(now, key="invoice:1", tenant_id="A"), request(now, key="invoice:1", tenant_id="B")]
    )
    assert a.id != b.id and not a.deduped and not b.deduped
    # One tenant twice: one job, the same id (and never another tenant's).
    (again,) = await driver.enqueue([request(now, key="invoice:1", tenant_id="B")])
    assert again.deduped and (again.id, again.run_id) == (b.id, b.run_id)
    # Two tenantless enqueues dedupe: coalesce, not the bare NULL column.
    (n1,) = await driver.enqueue([request(now, key="user:1")])
    (n2,) = await driver.enqueue([request(now, key="user:1")])
    assert n2.deduped and n2.id == n1.id
    # Same key, another job name: its own namespace.
    (other,) = await driver.enqueue([request(now, key="user:1", name="provision")])
    assert not other.deduped
    # A completed row does not block.
    (claimed,) = [c for c in await driver.claim("w", 10, 1000) if c.record.id == n1.id]
    await settler.ack(n1.id, claimed.token)
    (n3,) = await driver.enqueue([request(now, key="user:1")])
    assert not n3.deduped and n3.id != n1.id
    live = await sql.fetchval(
        "SELECT count(*) FROM mcp_jobs.jobs WHERE name = 'work' AND idempotency_key = 'user:1'"
        " AND state IN ('ready', 'delayed', 'running', 'suspended')"
    )
    assert live == 1


async def test_a_batch_dedupes_repeats_to_its_first_item(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    now = clock.now_ms()
    first = request(now, key="x")
    results = await driver.enqueue(
        [first, request(now, key="y"), request(now, key="x"), request(now, key="x", tenant_id="t")]
    )
    assert [r.deduped for r in results] == [False, False, True, False]
    assert results[2].id == first.id and results[2].run_id == first.run_id
    assert await sql.fetchval("SELECT count(*) FROM mcp_jobs.jobs") == 3


@pytest.mark.parametrize("where", ["live row", "earlier item"])
async def test_an_error_mode_collision_inserts_nothing_of_the_batch(
    driver: PostgresDriver,
    clock: ManualClock,
    sql: asyncpg.Connection[asyncpg.Record],
    where: str,
) -> None:
    now = clock.now_ms()
    if where == "live row":
        (holder,) = await driver.enqueue([request(now, key="held")])
        batch = [request(now, key="fresh"), request(now, key="held", on_conflict="error")]
        expected = holder.id
    else:
        batch = [
            request(now, key="fresh"),
            request(now, key="dup"),
            request(now, key="dup", on_conflict="error"),
        ]
        expected = batch[1].id
    before = await sql.fetchval("SELECT count(*) FROM mcp_jobs.jobs")
    with pytest.raises(JobsError) as raised:
        await driver.enqueue(batch)
    assert raised.value.code == "JOB_DUPLICATE"
    assert raised.value.details == {"job_id": expected}
    assert await sql.fetchval("SELECT count(*) FROM mcp_jobs.jobs") == before


async def test_a_large_batch_is_one_transaction(
    driver: PostgresDriver, clock: ManualClock, sql: asyncpg.Connection[asyncpg.Record]
) -> None:
    now = clock.now_ms()
    results = await driver.enqueue([request(now, key=f"k{i}") for i in range(2_000)])
    assert len({r.id for r in results}) == 2_000
    # Every row carries the id of the transaction that wrote it: one batch, one writer.
    writers = await sql.fetchval("SELECT count(DISTINCT xmin::text) FROM mcp_jobs.jobs")
    assert (await sql.fetchval("SELECT count(*) FROM mcp_jobs.jobs"), writers) == (2_000, 1)
