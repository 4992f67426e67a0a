"""The command lines SQLite's errors carry as their fix. Each is one `python3 -c` line
(`engine/drivers/python_lines.py`): the `sqlite3` shell, lsof and fuser are missing from slim
images.
"""

from __future__ import annotations

import os
import urllib.parse

from engine.drivers.python_lines import literal, python_line
from engine.shell_words import shell_word


def python_sql(
    path: str, sql: str, *, script: str | None = None, unreadable: str | None = None
) -> str:
    """A line printing what `sql` answers on the file at `path` through Python's own sqlite3:
    read-only, or with `script` (a change, such as an index rebuild) executed first. With
    `unreadable`, an error (a file SQLite cannot read at all) prints as that text and SQLite's
    message on one line, not as a traceback (a one-liner has no try)."""
    mode = "ro" if script is None else "rw"  # rw, not rwc: a missing file is not created
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + f"?mode={mode}"
    first = "" if script is None else f"db.executescript({literal(script)}); "
    hook = (
        ""
        if unreadable is None
        else "import sys; sys.excepthook = lambda kind, exc, tb: print("
        f"{literal(unreadable)}, exc, file=sys.stderr); "
    )
    code = (
        f"{hook}import sqlite3; db = sqlite3.connect({literal(uri)}, uri=True); {first}"
        f"print(*(row[0] for row in db.execute({literal(sql)})), sep=chr(10))"
    )
    return python_line(code)


def rebuild_index(path: str, table: str, name: str, create: str) -> str:
    """A line that drops index `name` and creates it again by `create`, in one transaction (a
    failed CREATE, such as two live rows on one unique key, leaves the old index), then prints
    the integrity check of `table`: "ok" once the table and its indexes agree."""
    create = create.strip().removesuffix(";")
    script = f"BEGIN IMMEDIATE; DROP INDEX IF EXISTS {name}; {create}; COMMIT;"
    return python_sql(path, f"PRAGMA integrity_check({table})", script=script)


def python_holders(path: str) -> str:
    """A line printing the pid and command line of each process that has the file at `path`
    (or its -wal or -shm) open, read from /proc, and how many processes' files it could not
    read. Where there is no /proc (macOS) it says to run lsof, which is installed there."""
    real = os.path.realpath(path)
    files = ", ".join(literal(real + end) for end in ("", "-wal", "-shm"))
    elsewhere = literal(f"no /proc on this system: run lsof {shell_word(path)}")
    nobody = literal(f"no process this user may inspect has {real} open")
    unseen = literal("more processes whose open files this user may not read")
    # No try in a one-liner, so nothing here may raise: glob skips a fd directory it may not
    # list, exists() is False for a link it may not follow, linecache reads a gone file as "".
    code = (
        "import glob, linecache, os, sys; "
        f'os.path.isdir("/proc/self/fd") or sys.exit({elsewhere}); '
        f"files = [{files}]; "
        'fds = glob.glob("/proc/[0-9]*/fd/*"); '
        'pid = lambda fd: fd.split("/")[2]; '
        'shut = {pid(d) for d in glob.glob("/proc/[0-9]*/fd") if not os.access(d, os.R_OK)}; '
        "hidden = shut | {pid(fd) for fd in fds if not os.path.exists(fd)}; "
        "pids = {pid(fd) for fd in fds if os.path.exists(fd) and os.path.realpath(fd) in files}; "
        'cmdline = lambda p: "".join(linecache.getlines(f"/proc/{p}/cmdline")); '
        "[print(p, cmdline(p).replace(chr(0), chr(32)).strip()) for p in sorted(pids, key=int)]; "
        f"pids or print({nobody}); "
        f"hidden and print(len(hidden), {unseen})"
    )
    return python_line(code)


def python_copy(files: list[str], directory: str) -> str:
    """A line that copies `files` (a database and its -wal) into `directory`, made if missing."""
    names = ", ".join(literal(f) for f in files)
    code = (
        f"import os, shutil; os.makedirs({literal(directory)}, exist_ok=True); "
        f"[shutil.copy2(f, {literal(directory)}) for f in ({names},)]"
    )
    return python_line(code)


def python_writable(path: str) -> str:
    """A line that lets its owner write `path` (chmod u+w)."""
    named = literal(path)
    code = f"import os, stat; os.chmod({named}, os.stat({named}).st_mode | stat.S_IWUSR)"
    return python_line(code)
