"""Whether another process holds an SQLite file's write lock, or none does: then the holder is a
connection of this very process (or the lock was just let go).

In WAL mode (the driver's) the write lock is a POSIX record lock on one byte of the `-shm` file.
F_GETLK reports a lock that conflicts with ours, and a process's own locks never conflict with
it: so it names another process's holder, and answers "unlocked" when only this process holds
it. Asked only once SQLite said busy, never on the way of a write that went through.
"""

from __future__ import annotations

import os
import struct
import sys

# WALINDEX_LOCK_OFFSET + WAL_WRITE_LOCK (sqlite3 wal.c): the byte a writer locks in `-shm`.
_WAL_WRITE_BYTE = 120
# `struct flock` as the kernel lays it out, and where its l_type and l_pid sit: Linux (l_type,
# l_whence, l_start, l_len, l_pid), macOS (l_start, l_len, l_pid, l_type, l_whence).
_LINUX, _DARWIN = ("hhqqi4x", 0, 4), ("qqihh", 3, 2)
# The `-shm` files opened here, by (device, inode), never closed: closing any descriptor of a
# file drops every POSIX lock this process holds on it, SQLite's included. One per file.
_OPENED: dict[tuple[int, int], int] = {}


def another_process_holds(path: str) -> bool | None:
    """True when another process holds the write lock of the SQLite file at `path`; False
    when no other process does; None when it cannot be told (no POSIX locks here, the file
    not in WAL mode, its `-shm` unreadable)."""
    held = _write_lock(path)
    return None if held is None else held[0]


def write_lock_holder(path: str) -> int | None:
    """The pid of the other process holding the write lock of the SQLite file at `path`, or
    None (none does, or it cannot be told; a pid of another pid namespace reads as 0)."""
    held = _write_lock(path)
    if held is None or not held[0] or held[1] <= 0:
        return None
    return held[1]


def command_line(pid: int) -> str | None:
    """The command line of process `pid` from /proc, cut at 200 characters; None where it
    cannot be read (no /proc, the process gone or another user's)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(400)
    except OSError:
        return None
    text = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    return text[:200] or None


def _write_lock(path: str) -> tuple[bool, int] | None:
    """(whether another process holds the write lock, its pid) for the file at `path`; None
    when it cannot be told."""
    try:
        import fcntl
    except ImportError:  # Windows
        return None
    if sys.platform.startswith("linux"):
        (fmt, type_at, pid_at) = _LINUX
        asked: tuple[int, ...] = (fcntl.F_WRLCK, os.SEEK_SET, _WAL_WRITE_BYTE, 1, 0)
    elif sys.platform == "darwin":
        (fmt, type_at, pid_at) = _DARWIN
        asked = (_WAL_WRITE_BYTE, 1, 0, fcntl.F_WRLCK, os.SEEK_SET)
    else:
        return None
    try:
        fd = _shm(path + "-shm")
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack(fmt, *asked))
    except OSError:
        return None
    fields = struct.unpack(fmt, answer)
    found: int = fields[type_at]
    pid: int = fields[pid_at]
    return found != fcntl.F_UNLCK, pid


def _shm(shm: str) -> int:
    """A descriptor of the `-shm` file (never created here), kept open for good."""
    info = os.stat(shm)
    key = (info.st_dev, info.st_ino)
    fd = _OPENED.get(key)
    if fd is None:
        fd = os.open(shm, os.O_RDWR)
        opened = os.fstat(fd)
        fd = _OPENED.setdefault((opened.st_dev, opened.st_ino), fd)
    return fd
