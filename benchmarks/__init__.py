"""Side-by-side benchmarks of mcp-jobs against peer queues on one PostgreSQL.

Run `python -m benchmarks --dsn postgresql://USER@HOST:PORT/postgres [--quick|--full]`; see
`benchmarks/README.md` for what each workload measures and how the ratios are read.
"""

from __future__ import annotations

__all__: list[str] = []
