"""The commands that install one of mcp-jobs' optional extras (redis, nats, oauth, uvloop), or
a newer mcp-jobs, for the fix of an error that needs it.

`pip install 'mcp-jobs[redis]'` runs as given only where `pip` on the PATH is this
interpreter's: a service started as `/srv/app/.venv/bin/mcp-jobs` leaves the operator's shell
with another pip, which looks for mcp-jobs on the index and finds none. This interpreter's pip
finds mcp-jobs installed (a checkout's editable install too) and adds only the extra's
requirements.
"""

from __future__ import annotations

import sys
from pathlib import Path

from engine.shell_words import shell_word

DISTRIBUTION = "mcp-jobs"


def this_python(executable: str | None = None) -> str:
    """This interpreter as one shell word: the one this package and its dependencies are
    installed in, which the `python3` on PATH is not when the install was pipx's or a venv that
    the reader's shell has not activated."""
    return shell_word(executable or sys.executable or "python3")


def install_line(extra: str, executable: str | None = None) -> str:
    """`<this python> -m pip install 'mcp-jobs[<extra>]'`."""
    python = this_python(executable)
    return f"{python} -m pip install {shell_word(f'{DISTRIBUTION}[{extra}]')}"


def _checkout() -> Path | None:
    """The git checkout this package runs from (an editable install), or None."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / ".git").exists() and (root / "pyproject.toml").exists() else None


def upgrade_line(executable: str | None = None, checkout: Path | None = None) -> str:
    """The line that brings a newer mcp-jobs: from the index, or, run from a checkout (where
    the index's copy would not replace the checkout's code), its branch pulled and installed."""
    python = this_python(executable)
    root = checkout or _checkout()
    if root is None:
        return f"{python} -m pip install --upgrade {DISTRIBUTION}"
    where = shell_word(str(root))
    return f"git -C {where} pull --ff-only && {python} -m pip install -e {where}"
