"""huey on `SqliteStorage`: its thread consumer, tasks enqueued through the task wrapper.

Settings: `Huey(storage_class=SqliteStorage, filename=…, results=False)` (the benchmark tasks
return nothing), WAL (huey's default journal) with `synchronous=NORMAL`, what mcp-jobs' SQLite
driver runs on — huey's own `fsync` knob offers only FULL or OFF. The consumer is huey's
`Consumer` with `workers=16, worker_type="thread"`: the handlers must count in this process (so
not `process`), and gevent's greenlets would gain nothing over threads on blocking sqlite3
calls. Workers poll an empty queue every 10 ms (`initial_delay = max_delay = 0.01`; huey's
default backs off from 0.1 s to 10 s), the interval DBOS's queue is given.

huey is synchronous. The producer calls it directly on its event loop (the producer process
runs nothing else, and a thread hop per call would charge huey for the harness); the worker
starts the consumer's threads from the loop, waits on the thread-safe tally, and stops the
consumer gracefully in a thread.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from huey import Huey
from huey.storage import SqliteStorage

from benchmarks.systems.base import Kind, Producer, System
from benchmarks.tally import Tally

POLL_S = 0.01
SYNCHRONOUS = "NORMAL"
_tally: Tally | None = None


class _Storage(SqliteStorage):  # type: ignore[misc]
    def _create_connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection = super()._create_connection()
        conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS}")
        return conn


def _noop(i: int) -> None:
    if _tally is None:
        raise RuntimeError("a benchmark task ran outside run_worker")
    _tally.start(i)
    _tally.end(i)


def _open(url: str) -> tuple[Any, Any]:
    """The Huey instance on the file at `url` (tables created if missing) and its task."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        raise ValueError(f"huey-sqlite needs a sqlite:/// URL, not {url!r}")
    huey = Huey("bench", results=False, storage_class=_Storage, filename=url[len(prefix) :])
    return huey, huey.task(name="bench_noop")(_noop)


class _HueyProducer(Producer):
    def __init__(self, huey: Any, task: Any) -> None:
        self.huey = huey
        self.task = task

    async def enqueue_one(self, kind: Kind, i: int) -> None:
        self.task(i)

    async def enqueue_many(self, kind: Kind, indexes: Sequence[int]) -> list[str]:
        # huey has no batch insert: `task.map` is this loop, one commit per task.
        tasks = [self.task.s(i) for i in indexes]
        for task in tasks:
            self.huey.enqueue(task)
        return [str(task.id) for task in tasks]

    async def close(self) -> None:
        self.huey.storage.close()


class HueySqlite(System):
    def settings(self, concurrency: int) -> dict[str, Any]:
        return {
            "version": version("huey"),
            "storage": f"SqliteStorage, WAL, synchronous={SYNCHRONOUS}, results=False",
            "consumer": (
                f"workers={concurrency}, worker_type=thread, "
                f"initial_delay=max_delay={POLL_S}, periodic=False"
            ),
            "loop": self.loop,
        }

    async def install(self, url: str, concurrency: int) -> None:
        huey, _ = _open(url)
        huey.storage.close()

    async def producer(self, url: str) -> Producer:
        return _HueyProducer(*_open(url))

    async def run_worker(self, url: str, kind: Kind, concurrency: int, tally: Tally) -> None:
        global _tally
        _tally = tally
        huey, _ = _open(url)
        consumer = huey.create_consumer(
            workers=concurrency,
            worker_type="thread",
            periodic=False,
            initial_delay=POLL_S,
            max_delay=POLL_S,
            check_worker_health=False,
        )
        tally.begin()
        consumer.start()
        try:
            await tally.wait()
        finally:
            # Graceful: joins every worker thread once its current task returned.
            await asyncio.to_thread(consumer.stop, True)
            huey.storage.close()

    async def unfinished(self, url: str, kind: Kind) -> int:
        huey, _ = _open(url)
        try:
            return int(huey.pending_count() + huey.scheduled_count())
        finally:
            huey.storage.close()
