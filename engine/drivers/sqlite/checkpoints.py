"""WAL checkpoints on a thread of their own, so that no caller's commit pays for one.

SQLite's automatic checkpoint runs inside the commit that crosses its threshold: that one
commit copies the WAL into the database file and syncs both, a stall of milliseconds for one
caller in every hundred or so. Here a thread with its own connection runs PASSIVE checkpoints
(which never take a writer's lock) as the writes add up. The driver's connection keeps its
automatic checkpoint at a higher threshold: a PASSIVE checkpoint running beside steady writes
never leaves the WAL wholly copied when a write begins, so only a writer's own checkpoint lets
the WAL start over from its beginning, and by then little is left for it to copy.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from engine.drivers.sqlite.library import sqlite3

logger = logging.getLogger("mcp_jobs.sqlite")

# The driver's own automatic checkpoint, in WAL frames (pages): SQLite's default is 1,000. The
# thread below has copied most of the WAL by then, so the commit that crosses it mostly syncs;
# the WAL file stays about 8 MB.
BACKSTOP_FRAMES = 2_000
# The thread is woken after this many write transactions, or this many rows written, since its
# last checkpoint: a few hundred pages of WAL for the lone enqueues, acks and claims of a queue.
WAKE_COMMITS = 64
WAKE_ROWS = 512
# A thread with nothing to do for this long (real seconds) ends; the next wake starts another.
IDLE_S = 30.0


class Checkpointer:
    """Counts the driver's write commits and checkpoints the WAL on its own thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._commits = 0
        self._rows_at = 0  # the driver connection's `total_changes` at the last wake
        self._wake = threading.Event()
        # Guards the hand-over between a wake and a thread leaving when idle, so no wake is lost.
        self._lock = threading.Lock()
        self._asked = False  # a checkpoint was asked for and has not run yet
        self._closing = False
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None
        self._failed = False
        self.done = 0  # checkpoints run

    def committed(self, total_changes: int) -> None:
        """After each write transaction the driver committed, with its connection's
        `total_changes`. Called by whichever thread holds the driver's connection: one at a
        time, so the counts need no lock."""
        self._commits += 1
        if self._commits < WAKE_COMMITS and total_changes - self._rows_at < WAKE_ROWS:
            return
        self._commits, self._rows_at = 0, total_changes
        with self._lock:
            self._asked = True
            if self._thread is None:
                thread = threading.Thread(
                    target=self._loop, name=f"mcp-jobs checkpoints {self.path}", daemon=True
                )
                try:
                    thread.start()
                except RuntimeError as exc:
                    # Out of threads: this commit stands all the same, and the commits' own
                    # checkpoint still runs; the next wake tries again.
                    logger.warning("no thread for WAL checkpoints of %s: %s", self.path, exc)
                    return
                self._thread = thread
        self._wake.set()

    def close(self) -> None:
        """Stop the thread, after the checkpoint last asked for, and close its connection."""
        with self._lock:
            self._closing = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join()

    def abandon(self) -> sqlite3.Connection | None:
        """In a forked child: the thread did not come along (nor may its lock be trusted), and
        the connection it opened in the parent must never be used or closed here. Returns that
        connection, to be kept."""
        conn, self._conn, self._thread = self._conn, None, None
        self._closing = True
        return conn

    def _loop(self) -> None:
        try:
            while True:
                woken = self._wake.wait(IDLE_S)
                with self._lock:
                    if not woken and not self._asked:
                        # Idle: leave, so that a driver dropped without close() leaves no thread
                        # behind for long. The next wake starts another.
                        self._thread = None
                        return
                    self._wake.clear()
                    asked, self._asked = self._asked, False
                if asked:
                    self._checkpoint()
                if self._closing:
                    return
        finally:
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()

    def _checkpoint(self) -> None:
        try:
            if self._conn is None:
                # No busy timeout: PASSIVE never waits, and opening needs no lock.
                self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=0)
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:
            # The commits' own backstop checkpoint still runs (and reports what stops it).
            if not self._failed:
                logger.warning("background WAL checkpoint of %s failed: %s", self.path, exc)
            self._failed = True
        else:
            self._failed = False
            self.done += 1
