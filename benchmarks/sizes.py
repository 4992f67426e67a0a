"""How many jobs each workload moves, per profile. `full` is the issue's sizes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Sizes:
    """Job counts for workloads 1–7 (numbers as in the issue)."""

    # 1. enqueue one job per call, sequentially
    single_enqueue: int
    # 2. batch enqueue, `batch` per call; 3. the same jobs drained by one worker process
    drain: int
    batch: int
    # 4. pickup latency: jobs enqueued `latency_gap_ms` apart into an idle worker
    latency_jobs: int
    latency_gap_ms: int
    # 5. jobs of 3 durable steps each
    steps: int
    # 6. workload 3 at scale (0 skips it)
    scale: int
    # 7. MCP tool latency, small history against large (0 skips a size); calls per tool.
    # Small: `tools_small` rows in all, a tenth of them settled. Large: `tools_live` live rows
    # and `tools_large` settled ones (`tools_large_sqlite` on SQLite, 0: the same).
    tools_small: int
    tools_large: int
    tool_calls: int
    # worker concurrency in every drain (the 16)
    concurrency: int = 16
    # Systems left out of workload 6 (Procrastinate drains ~150 jobs/s: 200,000 is 20+ minutes)
    scale_exclude: tuple[str, ...] = ("procrastinate",)
    # 7. settled rows at the large size on SQLite (0: tools_large), live rows at the large size,
    # and the steps of the one long trace `inspect_job` reads at both sizes
    tools_large_sqlite: int = 0
    tools_live: int = 10_000
    tools_trace_steps: int = 20_000

    def tools_settled(self, backend: str) -> int:
        """Workload 7's settled rows at the large size on `backend`."""
        if backend == "sqlite" and self.tools_large_sqlite > 0:
            return min(self.tools_large, self.tools_large_sqlite)
        return self.tools_large

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


PROFILES: dict[str, Sizes] = {
    # The CI smoke: a few hundred jobs, exactly-once only; timing is not looked at.
    "tiny": Sizes(
        single_enqueue=50,
        drain=300,
        batch=100,
        latency_jobs=20,
        latency_gap_ms=20,
        steps=60,
        scale=0,
        tools_small=200,
        tools_large=0,
        tool_calls=5,
        tools_trace_steps=200,
    ),
    "quick": Sizes(
        single_enqueue=500,
        drain=5_000,
        batch=1_000,
        latency_jobs=100,
        latency_gap_ms=20,
        steps=1_000,
        scale=20_000,
        tools_small=10_000,
        tools_large=50_000,
        tool_calls=30,
        tools_large_sqlite=20_000,
    ),
    # The default: the sizes for 1–5, workloads 6 and 7 scaled down to finish in minutes.
    "default": Sizes(
        single_enqueue=2_000,
        drain=20_000,
        batch=1_000,
        latency_jobs=200,
        latency_gap_ms=20,
        steps=5_000,
        scale=50_000,
        tools_small=10_000,
        tools_large=200_000,
        tool_calls=50,
        tools_large_sqlite=50_000,
    ),
    "full": Sizes(
        single_enqueue=5_000,
        drain=20_000,
        batch=1_000,
        latency_jobs=200,
        latency_gap_ms=20,
        steps=5_000,
        scale=200_000,
        tools_small=10_000,
        tools_large=1_000_000,
        tool_calls=100,
        scale_exclude=(),
        tools_large_sqlite=200_000,
    ),
}


def sizes_for(profile: str, overrides: dict[str, int] | None = None) -> Sizes:
    """A profile with some counts replaced (`--set scale=100000`)."""
    base = PROFILES[profile]
    changes: dict[str, Any] = dict(overrides or {})
    return replace(base, **changes)
