"""The Redis side of the suite (#25): mcp-jobs on Redis against arq, and against itself on
PostgreSQL, and a key space the benchmark may empty without touching anyone else's."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.redis_space import RedisSpaceError, database_number
from benchmarks.report import REDIS_SUBJECT, SUBJECT, compare, redis_ratios, render
from benchmarks.runner import main


def _results() -> dict[str, dict[str, dict[str, Any]]]:
    return {
        "1": {REDIS_SUBJECT: {"jobs_per_s": 3000.0}, "arq": {"jobs_per_s": 4000.0}},
        "3": {
            REDIS_SUBJECT: {"jobs_per_s": 4000.0},
            "arq": {"jobs_per_s": 1600.0},
            SUBJECT: {"jobs_per_s": 5000.0},
        },
        "4": {REDIS_SUBJECT: {"p50_ms": 1.5}, "arq": {"p50_ms": 6.0}, SUBJECT: {"p50_ms": 2.0}},
    }


def test_redis_targets_compare_mcp_jobs_on_redis_with_arq_the_right_way_round() -> None:
    rows = {r["target"]: r for r in redis_ratios(_results())}

    assert rows["3 drain ÷ arq"]["value"] == 2.5
    assert rows["3 drain ÷ arq"]["met"] is True
    assert rows["1 single enqueue ÷ arq"]["value"] == 0.75
    assert rows["1 single enqueue ÷ arq"]["met"] is False
    # Latency: lower is better, the goal is an upper bound.
    assert rows["4 pickup p50 ÷ arq p50"]["value"] == 0.25
    assert rows["4 pickup p50 ÷ arq p50"]["met"] is True
    # Redis ÷ PostgreSQL is information, never a verdict.
    assert rows["3 drain: Redis ÷ PostgreSQL"]["value"] == 0.8
    assert rows["3 drain: Redis ÷ PostgreSQL"]["met"] is None
    assert rows["4 pickup p50: Redis ÷ PostgreSQL"]["value"] == 0.75
    assert rows["5 steps: Redis ÷ PostgreSQL"]["value"] is None


def test_render_and_compare_print_the_redis_table() -> None:
    results = _results()
    document = {
        "meta": {
            "date": "today",
            "profile": "tiny",
            "machine": "m",
            "server": {},
            "redis": {"appendonly": "yes"},
            "sizes": {"scale": 0},
        },
        "results": results,
        "ratios": [],
        "redis_ratios": redis_ratios(results),
        "failures": [],
    }

    text = render(document)
    side_by_side = compare([document, document])

    assert "target (mcp-jobs Redis)" in text
    assert "redis: {'appendonly': 'yes'}" in text
    assert "| 1 single enqueue ÷ arq" in side_by_side
    assert "MISSED" in text


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "redis://127.0.0.1:6379",
        "redis://127.0.0.1:6379/",
        "postgresql://127.0.0.1/15",
    ],
)
def test_a_key_space_is_refused_on_database_0_or_none(url: str) -> None:
    with pytest.raises(RedisSpaceError):
        database_number(url)


def test_a_dedicated_database_is_accepted() -> None:
    assert database_number("redis://127.0.0.1:6379/15") == 15
    assert database_number("rediss://u:p@host:6380/3?prefix=x:") == 3


def test_the_cli_refuses_database_0_before_running_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["--dsn", "postgresql://nobody@127.0.0.1:1/x", "--redis-url", "redis://h/0"])

    assert status == 2
    assert "other than 0" in capsys.readouterr().err
