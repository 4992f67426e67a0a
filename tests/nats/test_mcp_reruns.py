"""The MCP server's rerun tests (tests/mcp/test_rerun_tools.py) on the NATS driver: an earlier
run read by its id, and a run id the job never had refused naming its runs."""

from tests.mcp.conftest import app, backfill_registry, mode, open_mcp  # noqa: F401
from tests.mcp.test_rerun_tools import *  # noqa: F403
