"""The CLI imports no optional driver's package until a URL of that driver is given: a machine
without the redis or nats extra runs every command on SQLite and PostgreSQL. (The check that a
read command installs no store imported both at the top of the module, for everyone.)"""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import mcp_jobs.cli.commands, mcp_jobs.cli.entry, mcp_jobs.cli.mend, mcp_jobs.cli.serve
print(sorted(m for m in ("nats", "redis") if m in sys.modules))
"""


def test_the_cli_imports_neither_redis_nor_nats() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
