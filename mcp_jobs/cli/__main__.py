"""`python -m mcp_jobs.cli`: the same command as the `mcp-jobs` script."""

import sys

from mcp_jobs.cli.entry import main

sys.exit(main())
