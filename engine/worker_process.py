"""Python's cyclic collector in a process a worker owns (`mcp-jobs worker`, the benchmarks).

A draining worker allocates a few short-lived containers a job; with the default thresholds the
collector runs often, now and then over every object the imports left behind
(benchmarks/README.md has the cost). The thresholds are process-wide, so only a command that
owns its process calls this, never the library's Worker, which shares its process with the
application that embeds it. It lives here rather than in mcp_jobs.cli, whose import loads the
whole CLI and the MCP server with it.
"""

from __future__ import annotations

import gc

# Young collections once per this many net allocations (Python's default is 700): garbage
# cycles wait a little longer, a few MB at most, for far fewer collections.
YOUNG_THRESHOLD = 10_000


def tune_for_worker() -> None:
    """Once start-up is over: move what it made out of every later collection's reach
    (gc.freeze: modules, models, the registry live as long as the process), and collect young
    objects less often. No full collection first: over the imports' heap it costs a worker
    more CPU than a 20,000-job drain then spends in the collector, to free a few cycles once."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
