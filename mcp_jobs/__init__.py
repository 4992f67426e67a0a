"""mcp-jobs: the MCP server and CLI in front of the jobs engine.

`operations` is what both faces call; `server` registers them as MCP tools, resources and
prompts; `cli` is the `mcp-jobs` command.
"""

from mcp_jobs.config import ServerLimits, Settings
from mcp_jobs.server import build_server

__all__ = ["ServerLimits", "Settings", "build_server"]
