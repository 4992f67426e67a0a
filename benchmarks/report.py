"""The printed table, the ratios against the issue's targets, and the JSON document."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.mcp_tools import HISTORY_CALLS
from benchmarks.systems import SYSTEMS

SUBJECT = "mcp-jobs-pg"
SQLITE = "mcp-jobs-sqlite"

Results = dict[str, dict[str, dict[str, Any]]]  # workload -> system key -> result


def _get(results: Results, workload: int, key: str, *path: str) -> float | None:
    node: Any = results.get(str(workload), {}).get(key)
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return float(node) if isinstance(node, int | float) and not isinstance(node, bool) else None


@dataclass(frozen=True)
class Target:
    """One line of the issue's targets: `value(subject) <op> goal`."""

    name: str
    goal: float
    op: str  # ">=" or "<="
    value: Callable[[Results, str], float | None]

    def evaluate(self, results: Results, subject: str) -> dict[str, Any]:
        value = self.value(results, subject)
        compare = operator.ge if self.op == ">=" else operator.le
        return {
            "target": self.name,
            "goal": f"{self.op} {self.goal:g}",
            "value": value,
            "met": None if value is None else bool(compare(value, self.goal)),
        }


def _ratio(workload: int, peer: str, *path: str) -> Callable[[Results, str], float | None]:
    def value(results: Results, subject: str) -> float | None:
        ours = _get(results, workload, subject, *path)
        theirs = _get(results, workload, peer, *path)
        return ours / theirs if ours is not None and theirs else None

    return value


def _scale(results: Results, subject: str) -> float | None:
    big = _get(results, 6, subject, "jobs_per_s")
    small = _get(results, 3, subject, "jobs_per_s")
    return big / small if big is not None and small else None


def _tool_growth(tool: str) -> Callable[[Results, str], float | None]:
    def value(results: Results, subject: str) -> float | None:
        large = _get(results, 7, subject, "large", "tools", tool, "p50_ms")
        small = _get(results, 7, subject, "small", "tools", tool, "p50_ms")
        return large / small if large is not None and small else None

    return value


def _history_growth(call: str) -> Callable[[Results, str], float | None]:
    """#21's acceptance: one call at large history ÷ the same call at small history."""

    def value(results: Results, subject: str) -> float | None:
        large = _get(results, 7, subject, "large", "history", call, "p50_ms")
        small = _get(results, 7, subject, "small", "history", call, "p50_ms")
        return large / small if large is not None and small else None

    return value


def _memory(peer: str) -> Callable[[Results, str], float | None]:
    """The worker's peak RSS ÷ the peer's, the worse of the drains at 20,000 and at scale."""

    def value(results: Results, subject: str) -> float | None:
        ours = [_get(results, w, subject, "peak_rss_mb") for w in (3, 6)]
        theirs = [_get(results, w, peer, "peak_rss_mb") for w in (3, 6)]
        pairs = [(a, b) for a, b in zip(ours, theirs, strict=True) if a is not None and b]
        return max(a / b for a, b in pairs) if pairs else None

    return value


def _large_tool_ms(tool: str) -> Callable[[Results, str], float | None]:
    """One MCP call's p50 in-process at large history (#27: 1,000,000 settled rows)."""

    def value(results: Results, subject: str) -> float | None:
        return _get(results, 7, subject, "large", "tools", tool, "p50_ms")

    return value


# Issue #27's targets (round three), then the earlier rounds' that still hold.
TARGETS = (
    Target("1 single enqueue ÷ floor", 0.95, ">=", _ratio(1, "floor", "jobs_per_s")),
    Target("2 batch enqueue ÷ floor", 0.6, ">=", _ratio(2, "floor", "jobs_per_s")),
    Target("2 batch enqueue ÷ PgQueuer", 1.5, ">=", _ratio(2, "pgqueuer", "jobs_per_s")),
    Target("3 drain ÷ floor", 0.8, ">=", _ratio(3, "floor", "jobs_per_s")),
    Target("3 drain ÷ PgQueuer", 3.0, ">=", _ratio(3, "pgqueuer", "jobs_per_s")),
    Target("3 worker CPU per job ÷ floor", 1.5, "<=", _ratio(3, "floor", "cpu_ms_per_job")),
    Target("5 steps ÷ floor", 0.75, ">=", _ratio(5, "floor", "jobs_per_s")),
    Target("4 pickup p50 ÷ floor p50", 1.0, "<=", _ratio(4, "floor", "p50_ms")),
    Target("4 pickup p95 ÷ floor p95", 1.0, "<=", _ratio(4, "floor", "p95_ms")),
    Target("worker peak memory ÷ floor", 1.2, "<=", _memory("floor")),
    Target("6 drain at scale ÷ drain (3)", 0.9, ">=", _scale),
    *(
        Target(f"7 {tool} p50 ms at large history", 5.0, "<=", _large_tool_ms(tool))
        for tool in ("inspect_job", "list_jobs", "queue_stats")
    ),
    Target("3 drain ÷ Procrastinate", 10, ">=", _ratio(3, "procrastinate", "jobs_per_s")),
    Target("5 steps ÷ DBOS", 10, ">=", _ratio(5, "dbos", "jobs_per_s")),
    Target("worker peak memory ÷ PgQueuer", 1.0, "<=", _memory("pgqueuer")),
    Target("7 inspect_job large ÷ small (p50)", 2.0, "<=", _tool_growth("inspect_job")),
    Target("7 list_jobs large ÷ small (p50)", 2.0, "<=", _tool_growth("list_jobs")),
    *(
        Target(f"7 {call} large ÷ small history (p50)", 2.0, "<=", _history_growth(call))
        for call, _, _ in HISTORY_CALLS
    ),
)

# #27: mcp-jobs on SQLite against the SQLite peers on the same file system, every workload
# they share (huey has no durable steps; neither peer a batch call: one call per job there).
SQLITE_PEERS = (("huey-sqlite", "huey"), ("dbos-sqlite", "DBOS"))
SQLITE_TARGETS = tuple(
    target
    for peer, label in SQLITE_PEERS
    for target in (
        Target(f"1 single enqueue ÷ {label}", 1.0, ">=", _ratio(1, peer, "jobs_per_s")),
        Target(f"2 batch enqueue ÷ {label}", 1.0, ">=", _ratio(2, peer, "jobs_per_s")),
        Target(f"3 drain ÷ {label}", 1.0, ">=", _ratio(3, peer, "jobs_per_s")),
        Target(f"4 pickup p50 ÷ {label}", 1.0, "<=", _ratio(4, peer, "p50_ms")),
        Target(f"4 pickup p95 ÷ {label}", 1.0, "<=", _ratio(4, peer, "p95_ms")),
        Target(f"5 steps ÷ {label}", 1.0, ">=", _ratio(5, peer, "jobs_per_s")),
    )
)


def sqlite_ratios(results: Results) -> list[dict[str, Any]]:
    """The SQLite peer targets for `SQLITE`; a workload the peer did not run gives none."""
    return [t.evaluate(results, SQLITE) for t in SQLITE_TARGETS]


# Issue #25: mcp-jobs on Redis against arq on the same server, and against itself on PostgreSQL.
REDIS_SUBJECT = "mcp-jobs-redis"
REDIS_TARGETS = (
    Target("3 drain ÷ arq", 1.5, ">=", _ratio(3, "arq", "jobs_per_s")),
    Target("1 single enqueue ÷ arq", 1.0, ">=", _ratio(1, "arq", "jobs_per_s")),
    Target("4 pickup p50 ÷ arq p50", 1.0, "<=", _ratio(4, "arq", "p50_ms")),
)
# No goal, shown beside the targets: Redis ÷ PostgreSQL for the same workloads, same run.
REDIS_INFO = (
    ("2 batch enqueue ÷ arq (no batch API)", _ratio(2, "arq", "jobs_per_s")),
    ("1 single enqueue: Redis ÷ PostgreSQL", _ratio(1, SUBJECT, "jobs_per_s")),
    ("2 batch enqueue: Redis ÷ PostgreSQL", _ratio(2, SUBJECT, "jobs_per_s")),
    ("3 drain: Redis ÷ PostgreSQL", _ratio(3, SUBJECT, "jobs_per_s")),
    ("4 pickup p50: Redis ÷ PostgreSQL", _ratio(4, SUBJECT, "p50_ms")),
    ("5 steps: Redis ÷ PostgreSQL", _ratio(5, SUBJECT, "jobs_per_s")),
    ("6 drain at scale: Redis ÷ PostgreSQL", _ratio(6, SUBJECT, "jobs_per_s")),
)


def redis_ratios(results: Results) -> list[dict[str, Any]]:
    """The Redis targets (met or not) and the informational ratios, for `REDIS_SUBJECT`."""
    rows = [t.evaluate(results, REDIS_SUBJECT) for t in REDIS_TARGETS]
    for name, value in REDIS_INFO:
        rows.append({"target": name, "goal": "info", "value": value(results, REDIS_SUBJECT)})
        rows[-1]["met"] = None
    return rows


def ratios(results: Results) -> list[dict[str, Any]]:
    rows = []
    for target in TARGETS:
        row = target.evaluate(results, SUBJECT)
        sqlite = target.evaluate(results, SQLITE)
        row["sqlite_value"] = sqlite["value"]
        rows.append(row)
    return rows


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def _once(results: Results, key: str) -> str:
    checks = [r.get("exactly_once") for w in results.values() if (r := w.get(key)) is not None]
    checks = [c for c in checks if c is not None]
    if not checks:
        return "—"
    return "yes" if all(checks) else "NO"


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "| " + " | ".join([first, *rest]) + " |"

    rule = "|" + "|".join(
        ("-" * (w + 1) + ":" if i else "-" * (w + 2)) for i, w in enumerate(widths)
    )
    return "\n".join([line(header), rule + "|", *(line(r) for r in rows)])


def main_table(results: Results, keys: list[str], scale_n: int) -> str:
    header = [
        "system",
        "1 enqueue/s",
        "2 batch enq/s",
        "3 drain/s",
        "4 p50 ms",
        "4 p95 ms",
        "4 p50 after commit",
        "5 steps jobs/s",
        f"6 drain/s @{scale_n:,}",
        "3 CPU ms/job",
        "peak RSS MB",
        "exactly once",
    ]
    rows = []
    for key in keys:
        peaks = [_get(results, w, key, "peak_rss_mb") for w in (3, 4, 5, 6)]
        peak = max((p for p in peaks if p is not None), default=None)
        rows.append(
            [
                SYSTEMS[key].label,
                _fmt(_get(results, 1, key, "jobs_per_s")),
                _fmt(_get(results, 2, key, "jobs_per_s")),
                _fmt(_get(results, 3, key, "jobs_per_s")),
                _fmt(_get(results, 4, key, "p50_ms"), 1),
                _fmt(_get(results, 4, key, "p95_ms"), 1),
                _fmt(_get(results, 4, key, "p50_after_commit_ms"), 1),
                _fmt(_get(results, 5, key, "jobs_per_s")),
                _fmt(_get(results, 6, key, "jobs_per_s")),
                _fmt(_get(results, 3, key, "cpu_ms_per_job"), 2),
                _fmt(peak, 1),
                _once(results, key),
            ]
        )
    return _table(header, rows)


def tools_table(results: Results) -> str:
    header = [
        "backend",
        "rows",
        "inspect_job p50 ms",
        "list_jobs p50 ms",
        "queue_stats p50 ms",
        "engine trace/list/stats p50 ms",
    ]
    rows = []
    for key, per in results.get("7", {}).items():
        for size in ("small", "large"):
            if size not in per:
                continue

            def p50(group: str, name: str, size: str = size, key: str = key) -> str:
                return _fmt(_get(results, 7, key, size, group, name, "p50_ms"), 2)

            rows.append(
                [
                    SYSTEMS[key].label,
                    _fmt(_get(results, 7, key, size, "rows")),
                    p50("tools", "inspect_job"),
                    p50("tools", "list_jobs"),
                    p50("tools", "queue_stats"),
                    " / ".join(p50("engine", k) for k in ("trace", "list", "stats")),
                ]
            )
    return _table(header, rows) if rows else ""


def history_table(results: Results) -> str:
    """Workload 7's calls at small and large history, and large ÷ small, per backend."""
    per = results.get("7", {})
    keys = [k for k in per if "small" in per[k] and "history" in per[k]["small"]]
    if not keys:
        return ""
    header = ["call (p50 ms)"]
    for key in keys:
        label = SYSTEMS[key].label
        settled = _get(results, 7, key, "large", "settled")
        header += [f"{label} small", f"{label} @{_fmt(settled)} settled", "large ÷ small"]
    rows = []
    for call, _, _ in HISTORY_CALLS:
        cells = [call]
        for key in keys:
            small = _get(results, 7, key, "small", "history", call, "p50_ms")
            large = _get(results, 7, key, "large", "history", call, "p50_ms")
            cells += [
                _fmt(small, 2),
                _fmt(large, 2),
                _fmt(large / small if large is not None and small else None, 2),
            ]
        rows.append(cells)
    return _table(header, rows)


def ratios_table(rows: list[dict[str, Any]]) -> str:
    header = ["target (mcp-jobs PostgreSQL)", "goal", "value", "met", "SQLite (info)"]
    body = []
    for r in rows:
        met = "—" if r["met"] is None else ("met" if r["met"] else "MISSED")
        body.append([r["target"], r["goal"], _fmt(r["value"], 2), met, _fmt(r["sqlite_value"], 2)])
    return _table(header, body)


def redis_table(rows: list[dict[str, Any]], title: str = "target (mcp-jobs Redis)") -> str:
    header = [title, "goal", "value", "met"]
    body = []
    for r in rows:
        met = "—" if r["met"] is None else ("met" if r["met"] else "MISSED")
        body.append([r["target"], r["goal"], _fmt(r["value"], 2), met])
    return _table(header, body)


def render(document: dict[str, Any]) -> str:
    meta = document["meta"]
    results: Results = document["results"]
    keys = [k for k in SYSTEMS if any(k in w for w in results.values())]
    parts = [
        f"mcp-jobs benchmarks — {meta['date']} — profile {meta['profile']}"
        + (f", best of {meta['repeat']} runs per step" if meta.get("repeat", 1) > 1 else ""),
        f"machine: {meta['machine']}",
        f"postgres: {meta['server']}",
        *([f"redis: {meta['redis']}"] if meta.get("redis") else []),
        *([f"nats: {meta['nats']}"] if meta.get("nats") else []),
        "",
        main_table(results, keys, meta["sizes"]["scale"]),
    ]
    tools = tools_table(results)
    if tools:
        parts += ["", tools]
    history = history_table(results)
    if history:
        parts += ["", history]
    parts += ["", ratios_table(document["ratios"])]
    redis_rows = document.get("redis_ratios") or []
    if any(r["value"] is not None for r in redis_rows):
        parts += ["", redis_table(redis_rows)]
    sqlite_rows = document.get("sqlite_ratios") or []
    if any(r["value"] is not None for r in sqlite_rows):
        parts += ["", redis_table(sqlite_rows, "target (mcp-jobs SQLite)")]
    if document.get("failures"):
        parts += ["", "failures:"] + [f"  {f}" for f in document["failures"]]
    return "\n".join(parts)


def compare(documents: list[dict[str, Any]]) -> str:
    """The target ratios of several runs side by side (the closing note wants two)."""
    header = ["target (mcp-jobs PostgreSQL)", "goal"]
    header += [f"run {i + 1}" for i in range(len(documents))]
    header.append("met in all")
    rows = []
    for target in TARGETS:
        cells = [target.name, f"{target.op} {target.goal:g}"]
        verdicts = []
        for document in documents:
            # By name: a document written before a target existed has no row for it.
            row = next((r for r in document["ratios"] if r["target"] == target.name), None)
            cells.append(_fmt(None if row is None else row["value"], 2))
            verdicts.append(None if row is None else row["met"])
        if any(v is None for v in verdicts):
            cells.append("—")
        else:
            cells.append("yes" if all(verdicts) else "no")
        rows.append(cells)
    dates = [f"run {i + 1}: {d['meta']['date']}" for i, d in enumerate(documents)]
    parts = [*dates, "", _table(header, rows)]
    redis_names = [t.name for t in REDIS_TARGETS] + [name for name, _ in REDIS_INFO]
    sqlite_names = [t.name for t in SQLITE_TARGETS]
    for title, key, names in (
        ("target (mcp-jobs Redis)", "redis_ratios", redis_names),
        ("target (mcp-jobs SQLite)", "sqlite_ratios", sqlite_names),
    ):
        side = _side_by_side(title, [d.get(key) or [] for d in documents], names)
        if side:
            parts += ["", side]
    return "\n".join(parts)


def _side_by_side(title: str, runs: list[list[dict[str, Any]]], names: list[str]) -> str:
    """Named ratio rows of several runs in columns ("" when no run has a value)."""
    if not any(r["value"] is not None for rows_ in runs for r in rows_):
        return ""
    header = [title, "goal", *(f"run {i + 1}" for i in range(len(runs))), "met in all"]
    body = []
    for name in names:
        found = [next((r for r in rows_ if r["target"] == name), None) for rows_ in runs]
        goal = next((r["goal"] for r in found if r is not None), "—")
        cells = [name, goal] + [_fmt(None if r is None else r["value"], 2) for r in found]
        verdicts = [None if r is None else r["met"] for r in found]
        cells.append("—" if any(v is None for v in verdicts) else "yes" if all(verdicts) else "no")
        body.append(cells)
    return _table(header, body)


def main(argv: list[str]) -> int:
    """`python -m benchmarks.report RUN.json [RUN2.json …]`: the table of the first run, then
    the ratios of every run side by side."""
    import json
    import sys

    if not argv:
        print(main.__doc__, file=sys.stderr)
        return 2
    documents = [json.loads(Path(p).read_text()) for p in argv]
    print(render(documents[0]))
    if len(documents) > 1:
        print()
        print(compare(documents))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
