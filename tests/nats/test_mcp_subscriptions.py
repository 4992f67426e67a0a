"""The MCP server's subscription tests (tests/mcp/test_subscriptions.py) on the NATS driver,
whose change signals the server pushes through the replica's KV watch (engine/drivers/nats)."""

from tests.mcp.conftest import app, backfill_registry, mode  # noqa: F401
from tests.mcp.test_subscriptions import *  # noqa: F403
