"""The MCP server's subscription tests (tests/mcp/test_subscriptions.py) on the Redis driver,
whose change signals they follow (engine/drivers/redis/changes.py)."""

from tests.mcp.conftest import app, backfill_registry, mode  # noqa: F401
from tests.mcp.test_subscriptions import *  # noqa: F403
