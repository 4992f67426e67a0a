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
import tempfile
import traceback
from datetime import UTC, datetime
from pathlib import Path

from engine.errors import JobsError
from engine.shell_words import shell_word

INCIDENT_DIR_ENV = "MCP_JOBS_INCIDENT_DIR"
KEEP = 200
SUFFIX = ".txt"


def fallback_dir() -> Path:
    """Where incidents can go when the configured directory cannot take them."""
    return Path(tempfile.gettempdir()) / "mcp-jobs-incidents"


class IncidentDirError(JobsError):
    code = "INCIDENT_DIR_UNWRITABLE"
    title = "the incident directory cannot be written"

    def __init__(self, path: Path, reason: str) -> None:
        """`path`: the directory MCP_JOBS_INCIDENT_DIR names; the fix names one that takes
        files (or drops the setting, when that one was named)."""
        fallback = fallback_dir()
        fix = (
            f"unset {INCIDENT_DIR_ENV}"
            if path == fallback
            else f"export {INCIDENT_DIR_ENV}={shell_word(str(fallback))}"
        )
        super().__init__(
            f"{INCIDENT_DIR_ENV}={path} cannot take the traceback of an unexpected failure "
            f"({reason}), so an INTERNAL error would name no file that holds it",
            fix,
            details={"path": str(path)},
        )


def incident_dir() -> Path:
    given = os.environ.get(INCIDENT_DIR_ENV)
    if given:
        return Path(given).expanduser().absolute()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state).expanduser().absolute() / "mcp-jobs" / "incidents"


def check_incident_dir() -> None:
    """IncidentDirError when MCP_JOBS_INCIDENT_DIR names a directory that cannot be made or
    written (a file, a read-only place): said when the server starts, not at its first
    failure. The default directory is not checked: nobody chose it, and a server without a
    writable home still serves (an INTERNAL error's fix then names a directory that is)."""
    if not os.environ.get(INCIDENT_DIR_ENV):
        return
    folder = incident_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        if isinstance(exc, FileExistsError | NotADirectoryError):
            reason = "a file is where the directory or one above it would be"
        raise IncidentDirError(folder, reason) from exc


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
