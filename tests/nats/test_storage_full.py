"""A JetStream store with no room left is STORAGE_FULL, on a nats-server these tests start with a
tiny `max_file_store` (skipped, with the reason, when no nats-server binary is installed), and
on a bucket created at its own `max_bytes`:

- an enqueue is refused at once and stores nothing, not even an index key, also when the store
  fills up in the middle of its batch;
- a settle is held through a full store, lands once room is freed, and fails typed at its
  deadline when none is;
- the fix line runs as given and prints what takes the room.
- a key changed under every compare-and-set stays retryable, and its fix runs and shows the key.

The store is filled by another stream (`FILLER`), and room freed by purging it, as an operator
would. Every wait is bounded; the held settle's pauses pass on an injected clock.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from engine import ManualClock
from engine.clock import ServerClock
from engine.drivers import open_driver
from engine.drivers.base import AckWrite
from engine.errors import JobsError
from schemas.jobs import EnqueueRequest, JobFilter
from tests.nats.server import NatsServer, binary_or_skip
from tests.support.paced_clock import PacedClock

pytest.importorskip("nats", reason="the nats extra is not installed")

import nats
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StreamConfig

from engine.drivers.nats import NatsDriver, connection, keys
from engine.drivers.nats.store import Store

LIMIT = "max_file_store: 64KB"
FILLER = "FILLER"
# Messages the filler may publish before the store must have refused one: a bound, not a wait.
FILL_AT_MOST = 200
FIX_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    binary = binary_or_skip()
    root = tmp_path_factory.mktemp("nats-full")
    server = NatsServer(binary, root / "store", name="full", jetstream=LIMIT)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def js(small_server: NatsServer) -> AsyncIterator[JetStreamContext]:
    client = await nats.connect(small_server.url)
    try:
        yield client.jetstream(timeout=5)
    finally:
        await client.close()


@pytest.fixture
async def url(small_server: NatsServer, js: JetStreamContext) -> AsyncIterator[str]:
    """A fresh bucket on the small server; the bucket and the filler are gone afterwards."""
    bucket = f"full_{os.urandom(4).hex()}"
    yield f"{small_server.url}/{bucket}"
    for stream in (FILLER, f"KV_{bucket}"):
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_stream(stream)


def _request(n: int, now: int, attempt: int = 0) -> EnqueueRequest:
    """Job `n`'s enqueue; a later `attempt` (a caller trying again) has ids of its own."""
    return EnqueueRequest(
        id=f"{attempt:016x}{n:016x}",
        run_id=f"{attempt + 1:016x}{n:016x}",
        name="work",
        queue="default",
        idempotency_key=f"k{n}",
        input={"n": n, "pad": "p" * 400},
        run_at=now,
        max_attempts=3,
    )


async def _fill(js: JetStreamContext) -> int:
    """Publish to the filler until the server refuses: answers how many messages went in."""
    await js.add_stream(StreamConfig(name=FILLER, subjects=["filler.>"]))
    for n in range(FILL_AT_MOST):
        try:
            await js.publish("filler.x", b"f" * 1_000)
        except nats.js.errors.APIError as exc:
            assert exc.err_code == 10023, exc
            return n
    raise AssertionError(f"the store took {FILL_AT_MOST} messages without filling up")


async def _run_as_given(fix: str) -> str:
    """Run `fix` through a shell from another directory, with only the project's bin on PATH
    (and this checkout on PYTHONPATH where the tests run from one)."""
    bin_dir = Path(sys.executable).parent
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    with tempfile.TemporaryDirectory() as elsewhere, anyio.fail_after(FIX_TIMEOUT_S):
        ran = await anyio.run_process(["bash", "-c", fix], cwd=elsewhere, env=env, check=False)
    assert ran.returncode == 0, ran.stderr.decode()
    return ran.stdout.decode()


async def _nothing_left_behind(
    driver: NatsDriver, js: JetStreamContext, kept: str, refused: range
) -> None:
    """Once room is freed, only `kept` is stored, and no index key of the refused batch was
    left behind to be rolled forward: the caller's next try makes its own jobs."""
    await js.purge_stream(FILLER)
    page = await driver.list_jobs(JobFilter(limit=50))
    assert [j.id for j in page.jobs] == [kept]
    again = [_request(n, driver.clock.now_ms(), attempt=1) for n in refused]
    placed = await driver.enqueue(again)
    assert [(r.id, r.deduped) for r in placed] == [(r.id, False) for r in again]


async def test_an_enqueue_into_a_full_store_is_storage_full_and_stores_nothing(
    url: str, js: JetStreamContext
) -> None:
    clock = ManualClock()
    driver = cast(NatsDriver, open_driver(url, clock=clock))
    try:
        await driver.migrate()
        (kept,) = await driver.enqueue([_request(1, clock.now_ms())])
        await _fill(js)
        batch = [_request(n, clock.now_ms()) for n in range(2, 12)]
        with pytest.raises(JobsError) as raised:
            await driver.enqueue(batch)
        error = raised.value
        assert error.code == "STORAGE_FULL" and error.retryable
        assert error.fix == f"mcp-jobs db nats-report --database-url {url}"
        fixes = connection.Fixes.of("nats://s3cret@broker:4222/jobs")
        assert fixes.report == 'mcp-jobs db nats-report --database-url "$MCP_JOBS_DATABASE_URL"'
        printed = await _run_as_given(error.fix)
        assert "account: file storage" in printed
        assert f"stream {FILLER}:" in printed and f"stream KV_{driver.bucket}:" in printed
        # The server's clock is read from a write, which the full store refuses: the report
        # says so, and a process on this machine's clock still opens, reads and claims.
        assert "clock: not read (the server refused the write it is read from" in printed
        await _still_opens(url, kept.id)
        await _nothing_left_behind(driver, js, kept.id, range(2, 12))
    finally:
        await driver.close()


async def _still_opens(url: str, kept: str) -> None:
    reader = cast(NatsDriver, open_driver(url))
    try:
        await reader.migrate()
        assert [j.id for j in (await reader.list_jobs(JobFilter(limit=5))).jobs] == [kept]
        assert isinstance(reader.clock, ServerClock) and not reader.clock.measured
    finally:
        await reader.close()


async def test_a_batch_that_fills_the_store_takes_back_what_it_wrote(
    url: str, js: JetStreamContext
) -> None:
    clock = ManualClock()
    driver = cast(NatsDriver, open_driver(url, clock=clock))
    try:
        await driver.migrate()
        (kept,) = await driver.enqueue([_request(1, clock.now_ms())])
        filled = await _fill(js)
        # Room for a few of the batch's writes, not for all of them.
        await js.purge_stream(FILLER, keep=filled - 4)
        stream = f"KV_{driver.bucket}"
        before = (await js.stream_info(stream)).state.last_seq
        batch = [_request(n, clock.now_ms()) for n in range(2, 22)]
        with pytest.raises(JobsError) as raised:
            await driver.enqueue(batch)
        assert raised.value.code == "STORAGE_FULL"
        # The store did fill up mid-batch: some of its writes had gone in.
        assert (await js.stream_info(stream)).state.last_seq > before
        await _nothing_left_behind(driver, js, kept.id, range(2, 22))
    finally:
        await driver.close()


async def test_a_settle_is_held_through_a_full_store(url: str, js: JetStreamContext) -> None:
    """An ack refused for room is tried again, 50 ms doubling: at its deadline it fails as
    STORAGE_FULL; once room is freed (here after the second pause) it lands. Given up, the
    finished job would run again after its lease."""
    clock = ManualClock()
    paced = PacedClock()
    driver = cast(
        NatsDriver,
        open_driver(url, clock=clock, retry_clock=paced, settle_retry_ms=1_000),
    )

    async def free() -> None:
        await js.purge_stream(FILLER)

    try:
        await driver.migrate()
        await driver.enqueue([_request(1, clock.now_ms())])
        (claimed,) = await driver.claim("w", 1, 60_000)
        await _fill(js)
        ack = AckWrite(claimed.record.id, claimed.token, None)
        with pytest.raises(JobsError) as raised:
            await driver.ack_many([ack])
        assert raised.value.code == "STORAGE_FULL"
        assert (paced.pauses, paced.now) == ([50, 100, 200, 400, 250], 1_000)
        paced = PacedClock(then=(2, free))
        driver._retry_clock = paced  # pyright: ignore[reportPrivateUsage]
        assert await driver.ack_many([ack]) == [None]
        assert paced.pauses == [50, 100]
        assert (await driver.get(claimed.record.id)).state == "done"
    finally:
        await driver.close()


async def test_a_bucket_at_its_max_bytes_is_storage_full(database_url: str) -> None:
    """A stream limit with discard=new (the KV default), set by an operator on the bucket."""
    server, _, bucket = database_url.rpartition("/")
    client = await nats.connect(server)
    try:
        config = KeyValueConfig(bucket=bucket, history=1, max_bytes=8_192, direct=False)
        await client.jetstream().create_key_value(config)
    finally:
        await client.close()
    clock = ManualClock()
    driver = open_driver(database_url, clock=clock)
    try:
        await driver.migrate()
        with pytest.raises(JobsError) as raised:
            for n in range(1, FILL_AT_MOST):
                await driver.enqueue([_request(n, clock.now_ms())])
        assert raised.value.code == "STORAGE_FULL"
        # The stream's own limit: the server's "stream store failed", not its account's limit.
        assert getattr(raised.value.__cause__, "err_code", None) == 10077
        printed = await _run_as_given(raised.value.fix)
        assert f"stream KV_{bucket}:" in printed and "max_bytes 8,192" in printed
    finally:
        await driver.close()


def _always_conflicting(store: Store) -> list[str]:
    tried: list[str] = []

    async def update(key: str, value: bytes, last: int | None = None) -> Any:
        tried.append(key)
        raise nats.js.errors.KeyWrongLastSequenceError

    store.kv.update = update  # type: ignore[method-assign]
    return tried


async def test_a_contended_key_is_retryable_and_its_fix_shows_the_key(database_url: str) -> None:
    clock = ManualClock()
    driver = cast(NatsDriver, open_driver(database_url, clock=clock))
    try:
        await driver.migrate()
        (job,) = await driver.enqueue([_request(1, clock.now_ms())])
        store = await driver._open()  # pyright: ignore[reportPrivateUsage]
        tried = _always_conflicting(store)
        with pytest.raises(JobsError) as raised:
            await driver.cancel(job.id, None, None)
        error = raised.value
        assert error.code == "DRIVER_UNAVAILABLE" and error.retryable and tried
        key = f"job.{job.id}"
        assert error.fix == f"mcp-jobs db nats-report --database-url {database_url} {key}"
        printed = await _run_as_given(error.fix)
        assert printed.startswith(f"{key} in {driver.bucket}: revision ")
        assert "written 0 times" in printed
    finally:
        await driver.close()


async def _two_holding_a_ghost(url: str) -> tuple[NatsDriver, NatsDriver, str, str]:
    """Two drivers on one bucket (two processes), both holding job 2 in their replicas, as
    when the other's watch took a batch's write before the batch was taken back."""
    clock = ManualClock()
    writer = cast(NatsDriver, open_driver(url, clock=clock))
    other = cast(NatsDriver, open_driver(url, clock=clock))
    await writer.migrate()
    await other.migrate()
    (kept,) = await writer.enqueue([_request(1, clock.now_ms())])
    (ghost,) = await writer.enqueue([_request(2, clock.now_ms())])
    seen = await other.list_jobs(JobFilter(limit=50))
    assert sorted(j.id for j in seen.jobs) == sorted([kept.id, ghost.id])
    return writer, other, kept.id, ghost.id


async def test_a_take_back_s_purge_is_announced_to_the_other_processes(
    url: str, js: JetStreamContext
) -> None:
    """A full store refuses even a delete marker, so the take-back purges, and no watch reports
    a purge: the other process (here one that never claims, as an MCP server) hears it on the
    replicas' notice subject and stops listing a job nobody enqueued."""
    writer, other, kept, ghost = await _two_holding_a_ghost(url)
    try:
        heard = anyio.Event()
        other_store = await other._open()  # pyright: ignore[reportPrivateUsage]
        forget = other_store.replica.purged

        def noted(key: str, revision: int) -> None:
            forget(key, revision)
            heard.set()

        other_store.replica.purged = noted  # type: ignore[method-assign]
        store = await writer._open()  # pyright: ignore[reportPrivateUsage]
        key = keys.job(ghost)
        entry = store.replica.get(key)
        assert entry is not None
        await store.purge_own(key, entry.revision)
        with anyio.fail_after(5):
            await heard.wait()
        page = await other.list_jobs(JobFilter(limit=50))
        assert [j.id for j in page.jobs] == [kept]
        assert other_store.replica.doc(key) is None
    finally:
        await other.close()
        await writer.close()


async def test_a_purge_whose_notice_was_missed_is_dropped_at_the_next_claim(
    url: str, js: JetStreamContext
) -> None:
    """A process that missed the notice (disconnected then) holds the purged job: its claim's
    compare-and-set fails, and the read after it finds the key gone and drops it."""
    writer, other, kept, ghost = await _two_holding_a_ghost(url)
    try:
        store = await writer._open()  # pyright: ignore[reportPrivateUsage]
        key = keys.job(ghost)
        entry = store.replica.get(key)
        assert entry is not None
        # The purge alone, announced to nobody.
        subject = f"$KV.{writer.bucket}.{key}"
        await js.purge_stream(store.replica.stream, subject=subject, seq=entry.revision + 1)

        claimed = await other.claim("w", 30, 60_000)
        assert [c.record.id for c in claimed] == [kept]
        page = await other.list_jobs(JobFilter(limit=50))
        assert [j.id for j in page.jobs] == [kept]
    finally:
        await other.close()
        await writer.close()
