"""The MCP server: `build_server(settings, jobs)` with the tools, resources and prompts over
`mcp_jobs.operations`, served on stdio or streamable HTTP."""

from mcp_jobs.server.app import JobsServer, build_server
from mcp_jobs.server.served import MUTATING_TOOLS, READ_TOOLS

__all__ = ["MUTATING_TOOLS", "READ_TOOLS", "JobsServer", "build_server"]
