"""Errors only the SQLite driver raises, and the one conversion of sqlite3's failures.

`convert` is where a sqlite3 (or binding) failure becomes a typed error, with the one command
most likely to help: a full disk is STORAGE_FULL, a value the database refused is
INVALID_ARGUMENT (terminal: the same value fails the same way every time), a damaged file or a
row another program wrote is STORE_DAMAGED (terminal too), a path that names a directory, a
device or another program's file, or runs through a file, is DATABASE_URL_INVALID (`refusal_of`,
asked before SQLite opens the path too), and only a locked, unreadable or unmigrated file is
DRIVER_UNAVAILABLE. Classified by SQLite's result code and the file's type and header,
never by message text. A dedupe index other than schema.sql declares is DRIVER_UNAVAILABLE too
(`live_key_broken`), found by reading the schema. Every fix runs where only Python is installed.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass

from engine.driver_errors import (
    DatabaseUrlInvalidError,
    DriverUnavailableError,
    StorageFullError,
    StoreDamagedError,
)
from engine.drivers.damage import JOB_COUNT_COLUMNS, JOB_JSON_COLUMNS, UndecodableRow
from engine.drivers.sqlite.fix_lines import (
    python_copy,
    python_holders,
    python_sql,
    python_writable,
    rebuild_index,
)
from engine.drivers.sqlite.library import (
    FALLBACK_MODULE,
    FALLBACK_PACKAGE,
    MIN_SQLITE,
    sqlite3,
    too_old_fix,
)
from engine.drivers.sqlite.lock_holder import command_line, write_lock_holder
from engine.drivers.sqlite.migrate import declared_statement
from engine.drivers.urls import migrate_fix
from engine.errors import InvalidArgumentError, JobsError
from engine.extras import upgrade_line
from engine.outbox_errors import OutboxNoTxError, OutboxTxKindError, OutboxWrongDatabaseError
from engine.shell_words import shell_word

# SQLite's primary result codes (the low byte of an extended code).
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_FULL_CODES = (sqlite3.SQLITE_FULL,)
_VALUE_CODES = (sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_TOOBIG, sqlite3.SQLITE_MISMATCH)
_ACCESS_CODES = (
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PERM,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_AUTH,
)
_DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
# What makedirs meets where it may not write.
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)
# What makedirs meets when a file stands where a directory of the path should be.
_IN_THE_WAY = (errno.EEXIST, errno.ENOTDIR)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# What sqlite3 raises for a value it cannot bind (an int past 64 bits, text with a lone
# surrogate): that value's refusal, not the database's, so it fails only the write carrying it.
UNBINDABLE = (OverflowError, UnicodeEncodeError)

# The unique index rule 2's dedupe stands on (schema.sql), and its table.
LIVE_KEY_INDEX, JOBS_TABLE = "mcp_jobs_jobs_live_key", "mcp_jobs_jobs"


class OutboxOtherFileError(OutboxWrongDatabaseError):
    """OUTBOX_WRONG_DATABASE for a sqlite3 (or, `aio`, an aiosqlite) connection to another file
    than the jobs': the fix stages through one of the same library on the jobs' file, by its
    path (sqlite3 takes no URL), in a transaction the application's write must share."""

    def __init__(self, jobs_path: str, tx_path: str, *, aio: bool = False) -> None:
        fix = aiosqlite_stage_fix(jobs_path) if aio else sqlite3_stage_fix(jobs_path)
        super().__init__(jobs_path, tx_path, fix)


def sqlite3_stage_fix(jobs_path: str) -> str:
    """A stage through a sqlite3 connection of the driver's module on the jobs' file, in a
    transaction of its own."""
    return (
        "from engine.drivers.sqlite import sqlite3; "
        f"tx = sqlite3.connect({jobs_path!r}, isolation_level=None); "
        'tx.execute("BEGIN"); await jobs.stage(tx, name, input); tx.commit()'
    )


def aiosqlite_stage_fix(jobs_path: str) -> str:
    """`sqlite3_stage_fix` through aiosqlite, whose calls are awaited; `async with` closes its
    thread, which an unclosed connection leaves to fail at exit."""
    return (
        f"async with aiosqlite.connect({jobs_path!r}, isolation_level=None) as tx: "
        'await tx.execute("BEGIN"); await jobs.stage(tx, name, input); await tx.commit()'
    )


class OutboxNoSqliteTxError(OutboxNoTxError):
    """OUTBOX_NO_TX with the sqlite3 form of its fix: a sqlite3 connection has no
    `.transaction()`; BEGIN opens one (in any isolation_level) and commit() ends it. `fix`: the
    form for another kind of connection (aiosqlite's, whose calls are awaited)."""

    def __init__(
        self, fix: str = 'conn.execute("BEGIN"); await jobs.stage(conn, name, input); conn.commit()'
    ) -> None:
        JobsError.__init__(
            self,
            "sqlite: stage() was given a connection that is not inside a transaction, so the "
            "job could exist without the write it belongs to",
            fix,
        )


class OutboxNotSqliteError(OutboxTxKindError):
    """INVALID_ARGUMENT for stage() handed no sqlite3 connection at all (a string, a path,
    another library's object): the fix opens one on the jobs' file, in the driver's module, in
    a transaction of its own, which the cause says the application's write must share."""

    def __init__(self, given: object, jobs_path: str) -> None:
        super().__init__(
            "sqlite",
            given,
            f"a sqlite3 connection to {jobs_path} after BEGIN",
            sqlite3_stage_fix(jobs_path),
        )
        _amend(
            self,
            "the fix opens a connection and a transaction of its own: the application's write "
            "goes in it too (before the stage), or the two do not commit together",
        )


class OutboxSqlalchemyError(OutboxTxKindError):
    """INVALID_ARGUMENT for stage() handed a SQLAlchemy connection or session: the fix stages
    through the driver connection under it (sqlite3's, or aiosqlite's, which the driver takes),
    inside the transaction it holds; never a connection of its own, which would commit apart
    and wait on the event loop for the application's own write lock."""

    def __init__(self, given: object, kind: str, fix: str, jobs_path: str) -> None:
        super().__init__(
            "sqlite", given, f"a sqlite3 or aiosqlite connection to {jobs_path} after BEGIN", fix
        )
        _amend(
            self,
            f"a SQLAlchemy {kind} holds one (`raw.driver_connection`), inside the transaction "
            "it has open once the application's write ran: stage through it, after that write, "
            "and both commit together",
        )


def _amend(error: JobsError, note: str) -> None:
    """Add `note` to `error`'s cause (and its message)."""
    error.cause = f"{error.cause}; {note}"
    error.args = (f"{error.code}: {error.cause}",)


class SqliteTooOldError(JobsError):
    code = "SQLITE_TOO_OLD"
    title = "the SQLite this Python links is older than the driver needs"

    def __init__(self, version: str, fix: str | None = None) -> None:
        fix = fix or too_old_fix()
        needs = ".".join(map(str, MIN_SQLITE))
        if FALLBACK_PACKAGE in fix:
            then = (
                f"{FALLBACK_PACKAGE} carries a current SQLite, which the driver uses once installed"
            )
        else:
            then = "a Python from uv carries a current SQLite: install mcp-jobs into the venv made"
        super().__init__(
            f"sqlite: this Python links SQLite {version} (and {FALLBACK_MODULE} is not installed "
            f"or no newer); the driver needs {needs} or newer, for RETURNING and upserts on a "
            f"partial unique index; {then}",
            fix,
            details={"driver": "sqlite", "sqlite_version": version, "needs": needs},
        )


class OutboxOtherSqliteError(JobsError):
    code = "OUTBOX_OTHER_SQLITE"
    title = "outbox staging was given a connection of another SQLite library than the driver's"

    def __init__(self, given: str, used: str, jobs_path: str) -> None:
        why = (
            " (this Python's own SQLite is older than it needs)" if used == FALLBACK_MODULE else ""
        )
        super().__init__(
            f"stage() was given a {given} connection, but the driver runs on {used}{why}; two "
            "copies of SQLite on one file in one process release each other's locks",
            sqlite3_stage_fix(jobs_path),
            details={"given": given, "driver_module": used},
        )


class SqliteWriteLockHeldError(JobsError):
    """SQLite stayed busy through a whole busy timeout and no other process holds the file's
    write lock: a connection of this process does (the application's open write transaction,
    most often the very one this call was made inside). Waiting on cannot help while this code
    waits; the outbox writes the job in that transaction instead. `staging`: the call was a
    stage through a connection that is not the one holding the lock."""

    code = "SQLITE_WRITE_LOCK_HELD"
    title = "another connection of this process holds the SQLite file's write lock"

    def __init__(self, path: str, waited_ms: int, *, staging: bool = False) -> None:
        if staging:
            what = (
                "stage() was given a connection that does not hold the write lock, and another "
                "connection of this process holds it"
            )
            then = "stage through the connection whose transaction holds the lock"
        else:
            what = (
                "the jobs' own connection could not write: another connection of this process "
                "holds the write lock (an open write transaction: BEGIN IMMEDIATE, or a write "
                "not yet committed)"
            )
            then = (
                "if it is the application's transaction this enqueue belongs to, stage the job "
                "through that connection instead (the outbox: the job is written in that "
                "transaction and exists once it commits); else commit or roll that transaction "
                "back before enqueuing"
            )
        super().__init__(
            f"sqlite: {path}: {what}, and kept it through the busy timeout ({waited_ms} ms); "
            f"no other process holds it, so waiting longer cannot help while this call waits: "
            f"{then}",
            "await jobs.stage(conn, name, input)",
            details={"driver": "sqlite", "path": path, "busy_timeout_ms": waited_ms},
        )


class SqliteValueRefusedError(InvalidArgumentError):
    """INVALID_ARGUMENT raised by the database itself: a value the engine's own checks let
    through and SQLite refused (an integer past 64 bits, a string past SQLite's length limit,
    a constraint). Terminal: the same value fails the same way every time."""

    def __init__(self, path: str, refused: str, detail: str, fix: str) -> None:
        JobsError.__init__(
            self,
            f"sqlite: {path} refused {refused} ({detail}); nothing of the refused write was stored",
            fix,
            details={"driver": "sqlite", "refused": refused},
        )


def live_key_broken(path: str, what: str) -> DriverUnavailableError:
    """The error for an enqueue the live-key index failed: `what` says how. The index is not what
    schema.sql declares (dropped, damaged, or built by another definition), and `db migrate`
    would leave it so (0001 creates it IF NOT EXISTS, once), so the fix builds it as declared."""
    create = declared_statement(LIVE_KEY_INDEX)
    return DriverUnavailableError(
        "sqlite",
        f"{path}: {what}: index {LIVE_KEY_INDEX} is not as schema.sql declares it",
        rebuild_index(path, JOBS_TABLE, LIVE_KEY_INDEX, create),
    )


def live_key_off(conn: sqlite3.Connection) -> bool:
    """Whether the jobs table is there but its live-key index is missing or other than declared
    (as SQLite stores a CREATE: without IF NOT EXISTS or the semicolon)."""
    found = dict(
        conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE name IN (?, ?)", (JOBS_TABLE, LIVE_KEY_INDEX)
        ).fetchall()
    )
    declared = declared_statement(LIVE_KEY_INDEX).replace(" IF NOT EXISTS", "", 1)
    return JOBS_TABLE in found and found.get(LIVE_KEY_INDEX) != declared.removesuffix(";")


def primary_code(exc: BaseException) -> int | None:
    """SQLite's primary result code of `exc`, or None when SQLite did not produce it."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_busy(exc: BaseException) -> bool:
    return primary_code(exc) in _BUSY_CODES


def convert(path: str, exc: BaseException) -> JobsError:
    """The typed error for a failure SQLite (or sqlite3's binding of a value) raised on the
    database at `path`. The caller raises it `from exc`."""
    if isinstance(exc, UndecodableRow):
        return undecodable(path, exc)
    if isinstance(exc, PathRefused):
        return exc.refusal.error(path)
    directory = os.path.dirname(os.path.abspath(path))
    code = primary_code(exc)
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    if code in _FULL_CODES or (isinstance(exc, OSError) and exc.errno in _NO_SPACE):
        return StorageFullError("sqlite", shell_word(directory), f"{name}: {exc}")
    if isinstance(exc, OverflowError):
        return SqliteValueRefusedError(
            path,
            "an integer outside SQLite's 64-bit INTEGER",
            str(exc),
            f"pass whole numbers from {INT64_MIN} to {INT64_MAX}",
        )
    if isinstance(exc, UnicodeEncodeError):
        return SqliteValueRefusedError(
            path,
            "text that UTF-8 cannot encode",
            str(exc),
            "pass text with no lone surrogate (engine.storable.storable_text replaces them)",
        )
    if code in _VALUE_CODES or isinstance(exc, sqlite3.DataError | sqlite3.IntegrityError):
        detail = f"{name}: {exc}"
        if code == sqlite3.SQLITE_TOOBIG:
            refused = "a string or blob longer than its length limit"
            fix = "store the large value elsewhere and pass a reference to it"
            return SqliteValueRefusedError(path, refused, detail, fix)
        # The cause names the column and the constraint; the schema shows what it accepts.
        fix = python_sql(path, "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")
        return SqliteValueRefusedError(path, "a value its schema does not accept", detail, fix)
    opening = code == sqlite3.SQLITE_CANTOPEN or (
        isinstance(exc, OSError) and exc.errno in _IN_THE_WAY
    )
    if opening or code == sqlite3.SQLITE_NOTADB:
        refusal = refusal_of(path)
        if refusal is not None:
            return refusal.error(path)
    if code in _DAMAGE_CODES:
        return _damaged(path, code, f"{name}: {exc}")
    if code in _ACCESS_CODES or (isinstance(exc, OSError) and exc.errno in _NOT_WRITABLE):
        read_only = read_only_refusal(path, f"{name}: {exc}")
        if read_only is not None:
            return read_only
    error = DriverUnavailableError("sqlite", f"{path}: {name}: {exc}", _unavailable_fix(path, exc))
    if code in _BUSY_CODES:
        _name_holder(error, path)
    return error


def _name_holder(error: JobsError, path: str) -> None:
    """Name the process holding the file's write lock: the fix lists every process with the
    file open (all the workers too), and only the lock tells which one is in the way."""
    pid = write_lock_holder(path)
    if pid is None:
        return
    command = command_line(pid)
    shown = f"process {pid} ({command})" if command else f"process {pid}"
    _amend(error, f"{shown} holds its write lock")
    error.details = {**(error.details or {}), "holder_pid": pid}


def read_only_refusal(path: str, detail: str) -> DatabaseUrlInvalidError | None:
    """DATABASE_URL_INVALID when the file, its -wal or -shm, or the directory where SQLite
    writes them beside it (even to read it), cannot be written: a read-only mount or a mode no retry
    changes (DRIVER_UNAVAILABLE would have a worker wait for ever). None when all can be."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        mounted_ro = bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return None
    if mounted_ro:
        what = f"{directory} is on a filesystem mounted read-only"
    else:
        # A -wal or -shm another user left (a `sudo mcp-jobs …`) refuses writes just the same.
        written = (path, f"{path}-wal", f"{path}-shm", directory)
        locked = [p for p in written if os.path.exists(p) and not os.access(p, os.W_OK)]
        if not locked:
            return None
        what = f"{locked[0]} is not writable by this user"
        if os.stat(locked[0]).st_uid == os.geteuid():
            fix = python_writable(locked[0])
            reason = f"{what} ({detail}): SQLite writes the file and its -wal and -shm beside it"
            return DatabaseUrlInvalidError(
                f"sqlite:///{path}", reason=reason, fix=fix, answered=True
            )
    # A copy in a writable place keeps every job: the file and its write-ahead log, if any.
    copy = os.path.join(os.path.expanduser("~"), "mcp-jobs")
    moved = os.path.join(copy, os.path.basename(path))
    if not os.path.exists(path):
        reason = f"{what} ({detail}): the database cannot be made there; make it elsewhere"
        fix = migrate_fix(f"sqlite:///{moved}")
        return DatabaseUrlInvalidError(f"sqlite:///{path}", reason=reason, fix=fix, answered=True)
    files = [p for p in (path, f"{path}-wal") if os.path.exists(p)]
    reason = (
        f"{what} ({detail}): SQLite writes the file and its -wal and -shm beside it, even to "
        f"read it. Mount it read-write, or copy it (the fix) and use sqlite:///{moved}"
    )
    fix = python_copy(files, copy)
    return DatabaseUrlInvalidError(f"sqlite:///{path}", reason=reason, fix=fix, answered=True)


# The first 16 bytes of every SQLite database file (an empty file is a new database).
SQLITE_HEADER = b"SQLite format 3\x00"
_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


@dataclass(frozen=True)
class Refusal:
    """Why a path cannot be the database file, and what `ls -ld` is to show: a URL no retry
    helps (DRIVER_UNAVAILABLE would have a worker wait for ever). `answered`: moving the file or
    directory in the way mends it with the URL unchanged (`serve` keeps serving the refusal
    meanwhile); otherwise the URL must name another file."""

    reason: str
    shown: str
    answered: bool

    def error(self, path: str) -> DatabaseUrlInvalidError:
        fix = f"ls -ld {shell_word(self.shown)}"
        return DatabaseUrlInvalidError(
            f"sqlite:///{path}", reason=self.reason, fix=fix, answered=self.answered
        )


class PathRefused(Exception):
    """Raised where the connection would open a path `refusal` refuses, so that SQLite never
    opens it (it wrote a journal beside /dev/null); `convert` makes each caller's error of it."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.reason)
        self.refusal = refusal


def check_path(path: str) -> None:
    """Raise PathRefused when `path` cannot be a database file; run before SQLite opens it."""
    refusal = refusal_of(path)
    if refusal is not None:
        raise PathRefused(refusal)


def refusal_of(path: str) -> Refusal | None:
    """Why the URL's path cannot be a database file as things stand, or None: it names a
    directory, a device, FIFO or socket, a file that is not SQLite's, or a file stands where one
    of its directories should be."""
    try:
        mode: int | None = os.stat(path).st_mode
    except OSError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        reason = (
            f"{path} is a directory; the URL's path names the database file itself "
            "(sqlite:///DIR/jobs.db)"
        )
        return Refusal(reason, path, answered=True)
    if mode is not None and not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "another kind of file")
        reason = (
            f"{path} is not a regular file but {kind}; the URL's path names the database file "
            "itself"
        )
        return Refusal(reason, path, answered=False)
    if mode is not None:
        if _foreign(path):
            reason = (
                f"{path} is not an SQLite database (it does not begin with SQLite's header): the "
                "URL names another file than the jobs database, left as it is"
            )
            return Refusal(reason, path, answered=False)
        return None
    blocker = _nearest_existing(os.path.dirname(os.path.abspath(path)))
    if blocker is None or os.path.isdir(blocker):
        return None
    reason = f"{blocker} is a file, not a directory, so {path} cannot be made under it"
    return Refusal(reason, blocker, answered=True)


def _foreign(path: str) -> bool:
    """Whether the file at `path` holds bytes but not SQLite's header: another program's file
    (a damaged database keeps its header unless its first 16 bytes are hit). False when it
    cannot be read: SQLite's own error says why."""
    try:
        with open(path, "rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except OSError:
        return False
    return head != b"" and head != SQLITE_HEADER


def _nearest_existing(directory: str) -> str | None:
    """`directory`, or its nearest ancestor that exists (a file, where one is in the way)."""
    while not os.path.lexists(directory):
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent
    return directory


def _damaged(path: str, code: int, detail: str) -> StoreDamagedError:
    if code == sqlite3.SQLITE_NOTADB:
        # SQLite's header is there (else `refusal_of`): what follows it is damaged.
        why = "the file's header is damaged, so none of it can be read; restore it from a backup"
    else:
        why = "pages of the file are damaged; restore it from a backup, or recover what is left"
    # The integrity check names the damaged pages; on a file SQLite cannot read at all it says
    # so in a line, not a traceback.
    fix = python_sql(path, "PRAGMA integrity_check", unreadable=f"{path} cannot be read:")
    return StoreDamagedError("sqlite", f"{path}: {detail}: {why}", fix)


def undecodable(path: str, exc: UndecodableRow) -> StoreDamagedError:
    cause = f"{path}: {exc}: the {exc.what}'s row holds a value the driver did not write"
    job = exc.job_id.replace("'", "''")
    # The JSON columns of the job's rows of that kind as stored, each quoted, whatever it holds.
    if exc.kind == "backfill":
        run = exc.run_id.replace("'", "''")
        shown = f"SELECT 'cursor: ' || quote(cursor) FROM mcp_jobs_backfills WHERE run_id = '{run}'"
    elif exc.kind == "inbound":
        event = exc.name.replace("'", "''")
        shown = (
            "SELECT 'payload: ' || quote(payload) FROM mcp_jobs_inbound_events "
            f"WHERE id = '{event}'"
        )
    elif exc.kind == "step":
        shown = f"SELECT name || ': ' || quote(output) FROM mcp_jobs_steps WHERE job_id = '{job}'"
    elif exc.kind == "event":
        shown = (
            "SELECT kind || ' at ' || at || ': ' || quote(data) FROM mcp_jobs_events "
            f"WHERE job_id = '{job}'"
        )
    else:
        columns = " || char(10) || ".join(
            f"'{column}: ' || quote({column})" for column in (*JOB_JSON_COLUMNS, *JOB_COUNT_COLUMNS)
        )
        shown = f"SELECT {columns} FROM {JOBS_TABLE} WHERE id = '{job}'"
    return StoreDamagedError("sqlite", cause, python_sql(path, shown))


def _unavailable_fix(path: str, exc: BaseException) -> str:
    code = primary_code(exc)
    directory = os.path.dirname(os.path.abspath(path))
    if code in _BUSY_CODES:
        return python_holders(path)  # who has the file open, so who may hold the lock
    if code in _ACCESS_CODES or isinstance(exc, OSError):
        # Only what exists, so the line succeeds and shows the modes in the way.
        shown = [_nearest_existing(directory) or "/"]
        if os.path.lexists(path):
            shown.append(path)
        return "ls -ld " + " ".join(shell_word(p) for p in shown)
    if code == sqlite3.SQLITE_IOERR:
        return f"df -h {shell_word(directory)}"
    if code is None:
        # Not SQLite's result but sqlite3's own misuse check: a bug in this build.
        return upgrade_line()
    # A plain SQL error here is a missing or older table or column.
    return migrate_fix(f"sqlite:///{path}")
