"""mcp-jobs: the MCP server and CLI in front of the jobs engine."""

from mcp_jobs.app import build_server
from mcp_jobs.config import Limits, Settings

__all__ = ["Limits", "Settings", "build_server"]
