"""The ratios the suite prints are the issue's targets, computed the right way round."""

from __future__ import annotations

from typing import Any

from benchmarks.report import SQLITE, SUBJECT, ratios, render, sqlite_ratios


def _results() -> dict[str, dict[str, dict[str, Any]]]:
    return {
        "3": {
            SUBJECT: {"jobs_per_s": 3000.0, "peak_rss_mb": 40.0, "exactly_once": True},
            "pgqueuer": {"jobs_per_s": 1000.0, "peak_rss_mb": 50.0, "exactly_once": True},
            "floor": {
                "jobs_per_s": 10000.0,
                "exactly_once": True,
                "cpu_ms_per_job": 0.04,
                "peak_rss_mb": 32.0,
            },
        },
        "4": {SUBJECT: {"p50_ms": 3.0}, "floor": {"p50_ms": 2.0}},
        "6": {SUBJECT: {"jobs_per_s": 2100.0}},
        "7": {
            SUBJECT: {
                "small": {"tools": {"inspect_job": {"p50_ms": 2.0}, "queue_stats": {"p50_ms": 1}}},
                "large": {"tools": {"inspect_job": {"p50_ms": 5.0}, "queue_stats": {"p50_ms": 9}}},
            }
        },
    }


def test_ratios_compare_mcp_jobs_against_each_peer_as_the_targets_say() -> None:
    rows = {r["target"]: r for r in ratios(_results())}

    assert rows["3 drain ÷ PgQueuer"]["value"] == 3.0
    assert rows["3 drain ÷ PgQueuer"]["met"] is True
    assert rows["3 drain ÷ floor"]["value"] == 0.3
    assert rows["3 drain ÷ floor"]["met"] is False
    assert rows["3 drain ÷ PgQueuer"]["met"] is True  # exactly the goal, 3.0
    assert rows["3 worker CPU per job ÷ floor"]["value"] is None  # ours was not measured
    # Latency: lower is better, so the goal is an upper bound.
    assert rows["4 pickup p50 ÷ floor p50"]["value"] == 1.5
    assert rows["4 pickup p50 ÷ floor p50"]["met"] is False
    assert rows["6 drain at scale ÷ drain (3)"]["value"] == 0.7
    assert rows["7 inspect_job large ÷ small (p50)"]["value"] == 2.5
    assert rows["7 inspect_job large ÷ small (p50)"]["met"] is False
    assert rows["worker peak memory ÷ PgQueuer"]["value"] == 0.8
    assert rows["worker peak memory ÷ PgQueuer"]["met"] is True
    assert rows["worker peak memory ÷ floor"]["value"] == 1.25
    assert rows["worker peak memory ÷ floor"]["met"] is False
    # #27's absolute bound: the call's own p50 at large history, not a ratio.
    assert rows["7 inspect_job p50 ms at large history"]["value"] == 5.0
    assert rows["7 inspect_job p50 ms at large history"]["met"] is True
    assert rows["7 queue_stats p50 ms at large history"]["met"] is False
    # A peer that did not run gives no ratio rather than a made-up one.
    assert rows["3 drain ÷ Procrastinate"]["value"] is None
    assert rows["3 drain ÷ Procrastinate"]["met"] is None


def test_sqlite_is_compared_with_each_sqlite_peer_on_what_they_share() -> None:
    results: dict[str, dict[str, dict[str, Any]]] = {
        "1": {SQLITE: {"jobs_per_s": 600.0}, "huey-sqlite": {"jobs_per_s": 2400.0}},
        "4": {SQLITE: {"p50_ms": 2.0, "p95_ms": 4.0}, "dbos-sqlite": {"p50_ms": 10.0}},
    }
    rows = {r["target"]: r for r in sqlite_ratios(results)}

    assert (rows["1 single enqueue ÷ huey"]["value"], rows["1 single enqueue ÷ huey"]["met"]) == (
        0.25,
        False,
    )
    assert (rows["4 pickup p50 ÷ DBOS"]["value"], rows["4 pickup p50 ÷ DBOS"]["met"]) == (0.2, True)
    assert rows["4 pickup p95 ÷ DBOS"]["value"] is None  # DBOS gave no p95 here
    assert rows["5 steps ÷ huey"]["met"] is None  # huey has no durable steps


def test_render_prints_every_target_with_its_verdict() -> None:
    results = _results()
    document = {
        "meta": {
            "date": "today",
            "profile": "tiny",
            "machine": "m",
            "server": {},
            "sizes": {"scale": 200_000},
        },
        "results": results,
        "ratios": ratios(results),
        "failures": [],
    }

    text = render(document)

    assert "3 drain ÷ PgQueuer" in text
    assert "MISSED" in text
    assert "@200,000" in text
