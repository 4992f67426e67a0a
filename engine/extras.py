"""The command that installs one of mcp-jobs' optional extras (redis, nats, oauth, uvloop) into
this interpreter, for the fix of an error that needs it.

`pip install 'mcp-jobs[redis]'` runs as given only where mcp-jobs comes from a package index:
installed from a source checkout, it names nothing pip can find, and `pip` on the PATH may be
another interpreter's. So the line installs the extra's own requirements, read from this
installation's metadata, with this interpreter's pip.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import sys
from collections.abc import Sequence

DISTRIBUTION = "mcp-jobs"
_EXTRA_CLAUSE = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")
_DANGLING_AND = re.compile(r"^\s*and\s+|\s+and\s*$")


def extra_requirements(extra: str, requires: Sequence[str] | None) -> list[str]:
    """The requirements `extra` adds, from the distribution's `Requires-Dist` lines, each with
    the markers other than the extra's own kept (`uvloop>=0.19; sys_platform != "win32"`)."""
    found: list[str] = []
    for line in requires or ():
        spec, _, marker = line.partition(";")
        clause = _EXTRA_CLAUSE.search(marker)
        if clause is None or clause[1] != extra:
            continue
        rest = _DANGLING_AND.sub("", marker[: clause.start()] + marker[clause.end() :]).strip()
        found.append(f"{spec.strip()}; {rest}" if rest else spec.strip())
    return found


def install_line(extra: str, executable: str | None = None) -> str:
    """`<this python> -m pip install <the extra's requirements>`; where this installation has no
    metadata to read them from, the extra by its index name."""
    try:
        requires = importlib.metadata.requires(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        requires = None
    wanted = extra_requirements(extra, requires) or [f"{DISTRIBUTION}[{extra}]"]
    python = shlex.quote(executable or sys.executable)
    return f"{python} -m pip install {' '.join(shlex.quote(w) for w in wanted)}"
