"""mcp-jobs: the MCP server and CLI in front of the jobs engine."""
