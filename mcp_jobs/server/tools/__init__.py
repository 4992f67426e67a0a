"""The MCP tools: thin registrations of `mcp_jobs.operations`, each answering its envelope."""

from mcp_jobs.server.tools import events, read, write

__all__ = ["events", "read", "write"]
