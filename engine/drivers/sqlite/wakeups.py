"""Wake-ups for SQLite: one in-process `Waker` per database file, and a poll for other processes.

Drivers on one file in one process (a worker and the client the app enqueues through, say) share
a waker, so an enqueue wakes an idle worker at once. Another process's commits cannot notify
us; `PRAGMA data_version` changes whenever any OTHER connection commits to the file, and reading
it is nearly free, so idle waits poll it.
"""

from __future__ import annotations

import os
import threading
import weakref

from engine.changes import ChangeFeed
from engine.wake import Waker

# Keyed by file AND thread: an anyio event belongs to one event loop, and a loop to one thread,
# so drivers in another thread (a server running its own loop) rely on the poll instead.
# Weak: a waker lives as long as a driver using it, so a later loop gets a fresh one rather
# than an event bound to a loop that is gone.
_WAKERS: weakref.WeakValueDictionary[tuple[str, int], Waker] = weakref.WeakValueDictionary()
# The change feeds (engine.changes), shared and kept the same way: a worker's ack here moves
# the feed a server in this process follows.
_FEEDS: weakref.WeakValueDictionary[tuple[str, int], ChangeFeed] = weakref.WeakValueDictionary()


def file_key(path: str) -> str:
    """One key per file, however the path was spelled (relative, symlinked, `..`)."""
    return os.path.realpath(os.path.abspath(path))


def shared_waker(path: str) -> Waker:
    key = (file_key(path), threading.get_ident())
    waker = _WAKERS.get(key)
    if waker is None:
        waker = Waker()
        _WAKERS[key] = waker
    return waker


def shared_feed(path: str) -> ChangeFeed:
    key = (file_key(path), threading.get_ident())
    feed = _FEEDS.get(key)
    if feed is None:
        feed = ChangeFeed()
        _FEEDS[key] = feed
    return feed
