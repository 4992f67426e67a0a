"""mcp-jobs: the MCP server and CLI in front of the jobs engine.

`operations` is what both faces call; `server` registers them as MCP tools, resources and
prompts; `cli` is the `mcp-jobs` command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_jobs.config import ServerLimits, Settings
    from mcp_jobs.server import build_server

# Loaded on first use: the server takes most of a second to import, and `mcp-jobs` (cli/__init__)
# must be able to take a Ctrl-C before that.
_LAZY = {
    "ServerLimits": "mcp_jobs.config",
    "Settings": "mcp_jobs.config",
    "build_server": "mcp_jobs.server",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcp_jobs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = ["ServerLimits", "Settings", "build_server"]
