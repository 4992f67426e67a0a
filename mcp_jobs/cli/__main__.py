"""`python -m mcp_jobs.cli`: the same command as the `mcp-jobs` script, with its Ctrl-C handling."""

import sys

from mcp_jobs.cli import main

sys.exit(main())
