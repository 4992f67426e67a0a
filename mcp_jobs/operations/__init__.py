"""What the MCP server, the CLI and a future dashboard all call: each operation validates, calls
the engine and shapes a result model, run in a `Scope` (who acts, for which tenant, under which
limits). No transport here: the server registers these as tools, the CLI prints their envelopes.
"""

from mcp_jobs.operations.backfills import follow_backfill, list_backfills, run_backfill
from mcp_jobs.operations.database import database_report
from mcp_jobs.operations.diagnose import diagnose_queue
from mcp_jobs.operations.drain import drain
from mcp_jobs.operations.jobs import (
    cancel_job,
    describe_jobs,
    enqueue_job,
    inspect_job,
    list_jobs,
    retry_job,
    wait_for_job,
)
from mcp_jobs.operations.prune import prune_history
from mcp_jobs.operations.scope import Progress, Scope
from mcp_jobs.operations.stats import queue_stats

__all__ = [
    "Progress",
    "Scope",
    "cancel_job",
    "database_report",
    "describe_jobs",
    "diagnose_queue",
    "drain",
    "enqueue_job",
    "follow_backfill",
    "inspect_job",
    "list_backfills",
    "list_jobs",
    "prune_history",
    "queue_stats",
    "retry_job",
    "run_backfill",
    "wait_for_job",
]
