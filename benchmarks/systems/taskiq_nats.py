"""taskiq with taskiq-nats on the same NATS server, through their public API.

The broker is `PullBasedJetStreamBroker`: tasks are messages on a JetStream stream (file
storage, the default) read by one durable pull consumer, so a message outlives a worker and is
redelivered until acknowledged — the durable setup, against the core-NATS `NatsBroker` that
loses whatever no worker is subscribed for. No result backend (taskiq's default discards
results; mcp-jobs keeps its settled jobs, so this favours taskiq). The worker is taskiq's own
`Receiver` as `taskiq worker --max-async-tasks 16 --max-prefetch 16` runs it, the pull fetching
16 at a time (taskiq-nats' default of one drained about half as fast here, with the same pickup
latency), acknowledged after the task ran (`when_saved`, the default). taskiq has no batch
enqueue: a batch is its `kiq` calls, `BATCH_IN_FLIGHT` at a time, each one JetStream publish
that waits for its PubAck. The worker acks with `msg.ack()`, a publish with no reply awaited.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit, urlunsplit

import nats
from taskiq import AsyncBroker, AsyncTaskiqDecoratedTask
from taskiq.receiver import Receiver
from taskiq_nats import PullBasedJetStreamBroker

from benchmarks.systems.base import Kind, Producer, System
from benchmarks.tally import Tally

FUNCTION = "bench_noop"
BATCH_IN_FLIGHT = 16
# A pull request waits this long for messages before it is renewed (it returns at the first).
FETCH_TIMEOUT_S = 1.0
STOP_LIMIT_S = 10.0


class _Names:
    """The stream, subject and durable consumer of one step, named after the URL's path."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.server = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
        self.stream = parts.path.strip("/") or "taskiq_bench"
        self.subject = f"{self.stream}.tasks"
        self.durable = f"{self.stream}_workers"


def _broker(url: str, batch: int) -> tuple[AsyncBroker, AsyncTaskiqDecoratedTask[..., Any]]:
    names = _Names(url)
    broker = PullBasedJetStreamBroker(
        names.server,
        subject=names.subject,
        stream_name=names.stream,
        durable=names.durable,
        pull_consume_batch=batch,
        pull_consume_timeout=FETCH_TIMEOUT_S,
    )

    async def bench_noop(i: int) -> None:
        tally = _tally
        if tally is None:
            raise RuntimeError("a benchmark task ran outside run_worker")
        tally.start(i)
        tally.end(i)

    task = broker.register_task(bench_noop, task_name=FUNCTION)
    return broker, task


# Set by `run_worker` in the one worker process; the task reports to it.
_tally: Tally | None = None


class _TaskiqProducer(Producer):
    def __init__(self, broker: AsyncBroker, task: AsyncTaskiqDecoratedTask[..., Any]) -> None:
        self.broker = broker
        self.task = task

    async def enqueue_one(self, kind: Kind, i: int) -> None:
        await self.task.kiq(i)

    async def enqueue_many(self, kind: Kind, indexes: Sequence[int]) -> list[str]:
        gate = asyncio.Semaphore(BATCH_IN_FLIGHT)

        async def one(i: int) -> str:
            async with gate:
                sent = await self.task.kiq(i)
            return str(sent.task_id)

        return list(await asyncio.gather(*(one(i) for i in indexes)))

    async def close(self) -> None:
        await self.broker.shutdown()


class TaskiqNats(System):
    # `taskiq worker` runs its receiver on uvloop when it is installed (taskiq/cli/worker/run.py).
    loop: ClassVar[Literal["asyncio", "uvloop"]] = "uvloop"

    def settings(self, concurrency: int) -> dict[str, Any]:
        return {
            "version": f"taskiq {version('taskiq')}, taskiq-nats {version('taskiq-nats')}",
            "broker": (
                "PullBasedJetStreamBroker(durable, "
                f"pull_consume_batch={concurrency}), "
                "stream defaults (file storage), no result backend"
            ),
            "worker": f"Receiver(max_async_tasks={concurrency}, max_prefetch={concurrency})",
            "enqueue": f"kiq; no batch API: {BATCH_IN_FLIGHT} calls in flight",
            "defaults": "ack when_saved (after the task), ack_wait 30 s",
            "loop": self.loop,
        }

    async def install(self, url: str, concurrency: int) -> None:
        # The broker's startup creates the stream and the durable consumer.
        broker, _ = _broker(url, concurrency)
        await broker.startup()
        await broker.shutdown()

    async def producer(self, url: str) -> Producer:
        broker, task = _broker(url, 1)
        await broker.startup()
        return _TaskiqProducer(broker, task)

    async def run_worker(self, url: str, kind: Kind, concurrency: int, tally: Tally) -> None:
        global _tally
        _tally = tally
        broker, _ = _broker(url, concurrency)
        broker.is_worker_process = True
        receiver = Receiver(broker, max_async_tasks=concurrency, max_prefetch=concurrency)
        finish = asyncio.Event()
        tally.begin()
        running = asyncio.create_task(receiver.listen(finish))
        done = asyncio.create_task(tally.wait())
        await asyncio.wait({running, done}, return_when=asyncio.FIRST_COMPLETED)
        # A graceful stop, as SIGTERM makes in `taskiq worker`: fetch no more, let the running
        # tasks finish and ack, then close (which flushes the acks still buffered).
        finish.set()
        async with asyncio.timeout(STOP_LIMIT_S):
            await running
        await broker.shutdown()
        done.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await done

    async def unfinished(self, url: str, kind: Kind) -> int:
        names = _Names(url)
        client = await nats.connect(names.server)
        try:
            info = await client.jetstream().consumer_info(names.stream, names.durable)
        finally:
            await client.close()
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)
