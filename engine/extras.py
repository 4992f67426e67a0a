"""The command that installs one of mcp-jobs' optional extras (redis, nats, oauth, uvloop), for
the fix of an error that needs it.

`pip install 'mcp-jobs[redis]'` runs as given only where `pip` on the PATH is this
interpreter's: a service started as `/srv/app/.venv/bin/mcp-jobs` leaves the operator's shell
with another pip, which looks for mcp-jobs on the index and finds none. This interpreter's pip
finds mcp-jobs installed (a checkout's editable install too) and adds only the extra's
requirements.
"""

from __future__ import annotations

import shlex
import sys

DISTRIBUTION = "mcp-jobs"


def install_line(extra: str, executable: str | None = None) -> str:
    """`<this python> -m pip install 'mcp-jobs[<extra>]'`."""
    python = shlex.quote(executable or sys.executable)
    return f"{python} -m pip install {shlex.quote(f'{DISTRIBUTION}[{extra}]')}"
