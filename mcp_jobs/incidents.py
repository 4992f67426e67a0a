"""Where an unexpected failure's traceback is kept, one file per correlation id, so that an
`INTERNAL` error's fix is a command that shows it (`cat FILE`) rather than a log to search.

The directory is `MCP_JOBS_INCIDENT_DIR`, else `$XDG_STATE_HOME/mcp-jobs/incidents`, else
`~/.local/state/mcp-jobs/incidents`; only the newest `KEEP` files stay, so a server that fails the
same way for a year does not fill its disk. Files are the owner's alone: a traceback can hold
values a caller sent.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path

INCIDENT_DIR_ENV = "MCP_JOBS_INCIDENT_DIR"
KEEP = 200
SUFFIX = ".txt"


def incident_dir() -> Path:
    given = os.environ.get(INCIDENT_DIR_ENV)
    if given:
        return Path(given).expanduser().absolute()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state).expanduser().absolute() / "mcp-jobs" / "incidents"


def record(where: str, correlation_id: str, exc: BaseException) -> Path | None:
    """Write `exc`'s traceback under `correlation_id`; the file, or None when it could not be
    written (the log still has it)."""
    folder = incident_dir()
    path = folder / f"{correlation_id}{SUFFIX}"
    text = "".join(
        (
            f"correlation_id: {correlation_id}\n",
            f"where: {where}\n",
            f"at: {datetime.now(UTC).isoformat(timespec='milliseconds')}\n",
            f"python: {sys.version.split()[0]}\n\n",
            *traceback.format_exception(exc),
        )
    )
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(text)
    except (OSError, ValueError):  # ValueError: a NUL in the configured directory
        return None
    _keep_newest(folder)
    return path


def _keep_newest(folder: Path) -> None:
    try:
        files = [(entry.stat().st_mtime_ns, entry) for entry in folder.glob(f"*{SUFFIX}")]
    except OSError:
        return
    if len(files) <= KEEP:
        return
    files.sort(key=lambda pair: pair[0])
    for _, old in files[: len(files) - KEEP]:
        with contextlib.suppress(OSError):  # another process pruned it first
            old.unlink()
