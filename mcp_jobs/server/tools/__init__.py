"""The MCP tools: thin registrations of `mcp_jobs.operations`, each answering its envelope."""

from mcp_jobs.server.tools import read, write

__all__ = ["read", "write"]
