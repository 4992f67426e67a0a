"""Workload 8's report (`benchmarks/pressure.py`): per phase the completion rate before, during
and after the pressure, claim latency, dead tuples and the recovery time; and the exactly-once
check of every job against the jobs table."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from typing import Any

# Recovered: the first second after the pressure from which a window of this many seconds runs
# within the tolerance of the baseline rate.
RECOVERY_WINDOW_S = 5
RECOVERY_TOLERANCE = 0.10


def _p(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarise(
    phase: dict[str, Any],
    runs: list[list[Any]],
    failures: Sequence[tuple[float, str]],
    samples: list[dict[str, Any]],
) -> dict[str, Any]:
    """One phase from the bodies' records (`runs`), the producer's failed calls (at, error) and
    the per-second samples of the table."""
    starts = sorted(r[4] for r in runs)
    b0, p0, p1, r1 = (
        phase[k] for k in ("baseline_from", "pressure_from", "pressure_to", "recovery_to")
    )

    def rate(a: float, b: float) -> float:
        return (bisect_left(starts, b) - bisect_left(starts, a)) / (b - a) if b > a else 0.0

    def latencies(a: float, b: float) -> list[float]:
        return [(r[4] - r[3]) * 1000 for r in runs if a <= r[4] < b]

    before = rate(b0, p0)
    recovery: int | None = None
    for k in range(0, max(0, int(r1 - p1) - RECOVERY_WINDOW_S + 1)):
        window = rate(p1 + k, p1 + k + RECOVERY_WINDOW_S)
        if before and abs(window - before) <= RECOVERY_TOLERANCE * before:
            recovery = k
            break
    buckets = [rate(p0 + k, p0 + k + 1) for k in range(int(p1 - p0))]
    during = [s for s in samples if p0 <= s["at"] < p1]
    during_lat = latencies(p0, p1)
    before_lat = latencies(b0, p0)
    return {
        "phase": phase["phase"],
        "pressure": phase["pressure"],
        "rate_before": before,
        "rate_during": rate(p0, p1),
        "rate_after": rate(p1, r1),
        "worst_second_during": min(buckets, default=None),
        "seconds_without_completions": sum(1 for b in buckets if b == 0),
        "claim_p50_ms_before": _p(before_lat, 0.5),
        "claim_p95_ms_before": _p(before_lat, 0.95),
        "claim_p50_ms_during": _p(during_lat, 0.5),
        "claim_p95_ms_during": _p(during_lat, 0.95),
        "claim_max_ms_during": max(during_lat, default=None),
        "dead_tuples_start": phase["dead_at_start"],
        "dead_tuples_end": phase["dead_at_end"],
        "dead_tuples_max_during": max((s["n_dead_tup"] or 0 for s in during), default=None),
        "dead_tuples_after_recovery": phase["dead_after_recovery"],
        # Jobs whose enqueue began before the pressure ended and that started after it.
        "backlog_at_end": sum(1 for r in runs if r[3] < p1 <= r[4]),
        "recovery_s": recovery,
        "recovered_within_window": recovery is not None,
        "producer_failures": Counter(name for at, name in failures if p0 <= at < r1),
        "driver_sessions_during": [
            min((s["driver"] for s in during), default=None),
            max((s["driver"] for s in during), default=None),
        ],
        "oldest_xmin_age_max": max((s["oldest_xmin_age"] or 0 for s in during), default=None),
        "seconds": [round(p0 - b0, 1), round(p1 - p0, 1), round(r1 - p1, 1)],
        "window": [b0, p0, p1, r1],
    }


def exactly_once(runs: list[list[Any]], rows: Sequence[Any], enqueued: int) -> dict[str, Any]:
    """Every enqueued index has a row, every row is done and its body ran exactly once."""
    executions = Counter(r[0] for r in runs)
    states = {row["id"]: row["state"] for row in rows}
    per_index = Counter(row["i"] for row in rows)
    result = {
        "enqueued": enqueued,
        "rows": len(states),
        "executions": len(runs),
        "not_done": sum(1 for s in states.values() if s != "done"),
        "never_ran": sum(1 for job_id in states if executions[job_id] == 0),
        "ran_twice": sum(1 for n in executions.values() if n > 1),
        "ran_twice_ids": sorted(j for j, n in executions.items() if n > 1)[:20],
        "unknown_ids": sum(1 for j in executions if j not in states),
        "indexes_missing": sum(1 for i in range(enqueued) if per_index[i] == 0),
        # An enqueue retried after a lost reply whose first try had committed (and whose job
        # had already run, so no live row deduped it): a second job for one index.
        "indexes_with_two_rows": sum(1 for n in per_index.values() if n > 1),
    }
    keys = ("not_done", "never_ran", "ran_twice", "unknown_ids", "indexes_missing")
    result["ok"] = all(result[k] == 0 for k in keys)
    return result


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def render(report: dict[str, Any]) -> str:
    head = (
        "| pressure | jobs/s before | during | after | worst 1 s during | claim p95 ms before"
        " | during | dead tuples start → end | backlog at end | recovery s |"
    )
    lines = [head, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for p in report["phases"]:
        recovery = _fmt(p["recovery_s"]) if p["recovered_within_window"] else "not recovered"
        lines.append(
            f"| {p['phase']} | {_fmt(p['rate_before'])} | {_fmt(p['rate_during'])}"
            f" | {_fmt(p['rate_after'])} | {_fmt(p['worst_second_during'])}"
            f" | {_fmt(p['claim_p95_ms_before'], 1)} | {_fmt(p['claim_p95_ms_during'], 1)}"
            f" | {_fmt(p['dead_tuples_start'])} → {_fmt(p['dead_tuples_end'])}"
            f" | {_fmt(p['backlog_at_end'])} | {recovery} |"
        )
    once = report["exactly_once"]
    lines.append("")
    lines.append(
        f"exactly once: {'yes' if once['ok'] else 'NO'} — {once['enqueued']:,} enqueued,"
        f" {once['rows']:,} rows, {once['executions']:,} executions, not done"
        f" {once['not_done']}, never ran {once['never_ran']}, ran twice {once['ran_twice']},"
        f" indexes missing {once['indexes_missing']}, second rows {once['indexes_with_two_rows']}"
    )
    return "\n".join(lines)
