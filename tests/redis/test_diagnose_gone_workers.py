"""diagnose_queue's LEASES_HELD_BY_GONE_WORKER (tests/mcp/test_diagnose_gone_workers.py) on the
Redis driver: it stores each lease's holder, so the finding is made there too."""

from tests.mcp.conftest import app, backfill_registry, mode, open_mcp  # noqa: F401
from tests.mcp.test_diagnose_gone_workers import *  # noqa: F403
