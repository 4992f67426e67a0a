"""The ratios the suite prints are the issue's targets, computed the right way round."""

from __future__ import annotations

from typing import Any

from benchmarks.report import SUBJECT, ratios, render


def _results() -> dict[str, dict[str, dict[str, Any]]]:
    return {
        "3": {
            SUBJECT: {"jobs_per_s": 3000.0, "peak_rss_mb": 40.0, "exactly_once": True},
            "pgqueuer": {"jobs_per_s": 1000.0, "peak_rss_mb": 50.0, "exactly_once": True},
            "floor": {"jobs_per_s": 10000.0, "exactly_once": True},
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
    # Latency: lower is better, so the goal is an upper bound.
    assert rows["4 pickup p50 ÷ floor p50"]["value"] == 1.5
    assert rows["4 pickup p50 ÷ floor p50"]["met"] is False
    assert rows["6 drain at scale ÷ drain (3)"]["value"] == 0.7
    assert rows["7 inspect_job large ÷ small (p50)"]["value"] == 2.5
    assert rows["7 inspect_job large ÷ small (p50)"]["met"] is False
    assert rows["worker peak memory ÷ PgQueuer"]["value"] == 0.8
    assert rows["worker peak memory ÷ PgQueuer"]["met"] is True
    # A peer that did not run gives no ratio rather than a made-up one.
    assert rows["3 drain ÷ Procrastinate"]["value"] is None
    assert rows["3 drain ÷ Procrastinate"]["met"] is None


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
