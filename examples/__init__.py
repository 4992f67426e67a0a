"""Example applications built on mcp-jobs; `examples.shop` is the one the demo and docs use."""
