"""The pressure harness (benchmarks/pressure.py) at tiny scale: every phase applies its pressure
under a steady load, the report has its shape, and every job ran exactly once.

Timing is never asserted: the phases last a couple of seconds, so the rates mean nothing here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.databases import fresh_database
from benchmarks.pressure import PHASES, build_parser, parse_phases, run
from benchmarks.pressure_report import exactly_once, render

PG_DSN_ENV = "MCP_JOBS_TEST_PG_DSN"

pytestmark = pytest.mark.slow

PHASE_KEYS = {
    "rate_before",
    "rate_during",
    "rate_after",
    "claim_p95_ms_during",
    "dead_tuples_start",
    "dead_tuples_end",
    "recovery_s",
    "backlog_at_end",
    "producer_failures",
}


@pytest.mark.timeout(240)
async def test_every_pressure_runs_under_load_and_each_job_runs_exactly_once(
    tmp_path: Path,
) -> None:
    dsn = os.environ.get(PG_DSN_ENV)
    if not dsn:
        pytest.skip(f"{PG_DSN_ENV} is not set (.ci/run sets it)")
    options = build_parser().parse_args(
        [
            "--phase-seconds=2",
            "--baseline-seconds=1",
            "--recovery-seconds=2",
            "--rate=100",
            "--concurrency=4",
            "--idle-connections=20",
            "--drain-limit-s=60",
            f"--logs={tmp_path}",
        ]
    )
    options.phases = parse_phases("all")

    async with fresh_database(dsn, "postgres", "pressure_test") as url:
        report = await run(url, options, echo=lambda _: None)

    assert report["worker_error"] is None
    assert report["drain_after_s"] is not None
    assert [p["phase"] for p in report["phases"]] == list(PHASES)
    for phase in report["phases"]:
        assert phase.keys() >= PHASE_KEYS, phase["phase"]
        assert "error" not in phase["pressure"], phase
    pressures = {p["phase"]: p["pressure"] for p in report["phases"]}
    assert pressures["idle_tx"]["xid"] > 0
    assert pressures["rr_readers"]["scans"] >= pressures["rr_readers"]["readers"] == 4
    assert pressures["terminate"]["rounds"] > 0
    assert pressures["idle_connections"]["held"] == 20
    once = report["exactly_once"]
    assert once["ok"], once
    assert once["executions"] == once["rows"] == once["enqueued"] > 0
    assert "exactly once: yes" in render(report)


def test_the_check_catches_a_job_run_twice_a_lost_one_and_an_unsettled_one() -> None:
    rows = [{"id": "a", "i": 0, "state": "done"}, {"id": "b", "i": 1, "state": "ready"}]
    runs: list[list[object]] = [["a", 0, 1, 0.0, 1.0], ["a", 0, 2, 0.0, 2.0]]

    once = exactly_once(runs, rows, enqueued=3)

    assert not once["ok"]
    assert (once["ran_twice"], once["never_ran"], once["not_done"]) == (1, 1, 1)
    assert once["indexes_missing"] == 1
