"""The benchmark suite in tiny mode, so it cannot rot: every system that is installed moves a
few hundred jobs through every workload it takes part in, and each job runs exactly once.

Timing is never asserted. Peers (Procrastinate, PgQueuer, DBOS) come from the `bench` extra and
are skipped when it is not installed; mcp-jobs on PostgreSQL and SQLite and the raw floor always
run (PostgreSQL ones only when `MCP_JOBS_TEST_PG_DSN` is set, as `.ci/run` does). The Redis ones
(mcp-jobs on Redis, arq) run when `MCP_JOBS_BENCH_REDIS_URL` names a database they may empty.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.runner import run_suite
from benchmarks.sizes import sizes_for
from benchmarks.systems import SYSTEMS, available

PG_DSN_ENV = "MCP_JOBS_TEST_PG_DSN"
REDIS_URL_ENV = "MCP_JOBS_BENCH_REDIS_URL"

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
@pytest.mark.parametrize("key", list(SYSTEMS))
async def test_every_workload_runs_each_job_exactly_once(key: str, tmp_path: Path) -> None:
    entry = SYSTEMS[key]
    if not available(key):
        pytest.skip(f"{entry.requires} is not installed (pip install -e '.[bench]')")
    dsn = os.environ.get(PG_DSN_ENV)
    if entry.backend == "postgres" and not dsn:
        pytest.skip(f"{PG_DSN_ENV} is not set (.ci/run sets it)")
    redis_url = os.environ.get(REDIS_URL_ENV)
    if entry.backend == "redis" and not redis_url:
        pytest.skip(f"{REDIS_URL_ENV} is not set (a Redis database the suite may FLUSHDB)")
    if entry.backend == "nats":
        pytest.skip("the NATS systems' tiny run is tests/benchmarks/test_nats_bench.py")
    sizes = sizes_for("tiny")

    document = await run_suite(
        dsn,
        sizes,
        profile="tiny",
        systems=[key],
        logs=tmp_path,
        redis_url=redis_url,
        echo=lambda _: None,
    )

    assert document["failures"] == []
    results = document["results"]
    expected = {w for w in entry.workloads if w != 6 or sizes.scale > 0}
    assert {int(w) for w, per in results.items() if key in per} == expected
    for workload in expected - {2, 7}:
        outcome = results[str(workload)][key]
        assert outcome["exactly_once"], (workload, outcome["check"])
        assert outcome["check"]["executions"] == outcome["check"]["jobs"] > 0
    if 7 in expected:
        tools = results["7"][key]["small"]["tools"]
        assert set(tools) == {"inspect_job", "list_jobs", "queue_stats"}
        assert all(t["p50_ms"] > 0 for t in tools.values())
