"""The NATS side of the suite (#28): mcp-jobs on NATS and taskiq-nats in tiny mode, each job run
exactly once, and a step's namespace gone from the server afterwards.

Timing is never asserted. The runs need a nats-server with JetStream in
`MCP_JOBS_BENCH_NATS_URL` (or `MCP_JOBS_TEST_NATS_URL`, as `.ci/run` sets it) and are skipped
with that reason without one; taskiq-nats comes from the `bench` extra.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.nats_space import NatsSpaceError, fresh_namespace, server_address
from benchmarks.runner import main, run_suite
from benchmarks.sizes import sizes_for
from benchmarks.systems import SYSTEMS, available

URL_ENVS = ("MCP_JOBS_BENCH_NATS_URL", "MCP_JOBS_TEST_NATS_URL")
NATS_SYSTEMS = [k for k, e in SYSTEMS.items() if e.backend == "nats"]


def _nats_url() -> str:
    pytest.importorskip("nats", reason="the nats extra is not installed")
    for name in URL_ENVS:
        if os.environ.get(name):
            return os.environ[name]
    pytest.skip(f"neither {' nor '.join(URL_ENVS)} is set (a nats-server -js to run against)")


def test_the_nats_systems_are_registered() -> None:
    assert {"mcp-jobs-nats", "taskiq-nats"} <= set(NATS_SYSTEMS)
    assert SYSTEMS["mcp-jobs-nats"].workloads == SYSTEMS["mcp-jobs-redis"].workloads


async def test_without_a_nats_url_the_nats_systems_are_skipped_by_name(tmp_path: Path) -> None:
    said: list[str] = []

    document = await run_suite(
        None, sizes_for("tiny"), systems=NATS_SYSTEMS, logs=tmp_path, echo=said.append
    )

    assert set(document["meta"]["skipped"]) == set(NATS_SYSTEMS)
    assert document["results"] == {}
    assert any("mcp-jobs-nats: no --nats-url given" in line for line in said)


@pytest.mark.parametrize("url", ["redis://127.0.0.1:4222", "nats:///bucket", "127.0.0.1:4222"])
def test_a_url_that_is_no_nats_server_is_refused(url: str) -> None:
    with pytest.raises(NatsSpaceError):
        server_address(url)


def test_the_cli_refuses_a_bad_nats_url_before_running_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["--dsn", "postgresql://nobody@127.0.0.1:1/x", "--nats-url", "redis://h/1"])

    assert status == 2
    assert "expected nats://host:port" in capsys.readouterr().err


async def test_a_step_namespace_leaves_no_stream_behind() -> None:
    import nats

    url = _nats_url()
    async with fresh_namespace(url, "namespace check") as step_url:
        client = await nats.connect(server_address(url))
        try:
            js = client.jetstream()
            bucket = step_url.rsplit("/", 1)[1]
            await js.create_key_value(bucket=bucket)
            await js.add_stream(name=bucket, subjects=[f"{bucket}.tasks"])
        finally:
            await client.close()

    client = await nats.connect(server_address(url))
    try:
        names = [s.config.name or "" for s in await client.jetstream().streams_info()]
    finally:
        await client.close()
    assert not [n for n in names if bucket in n]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("key", NATS_SYSTEMS)
async def test_every_workload_runs_each_job_exactly_once_on_nats(key: str, tmp_path: Path) -> None:
    entry = SYSTEMS[key]
    url = _nats_url()
    if not available(key):
        pytest.skip(f"{entry.requires} is not installed (pip install -e '.[bench]')")
    sizes = sizes_for("tiny")

    document = await run_suite(
        None, sizes, profile="tiny", systems=[key], logs=tmp_path, nats_url=url, echo=lambda _: None
    )

    assert document["failures"] == []
    assert document["meta"]["nats"]["nats_version"]
    results = document["results"]
    expected = {w for w in entry.workloads if w != 6 or sizes.scale > 0}
    assert {int(w) for w, per in results.items() if key in per} == expected
    for workload in expected - {2}:
        outcome = results[str(workload)][key]
        assert outcome["exactly_once"], (workload, outcome["check"])
        assert outcome["check"]["executions"] == outcome["check"]["jobs"] > 0
