"""Faults on real processes against a PRIVATE redis-server per test: a worker SIGKILLed mid-step,
two workers sharing 2,000 jobs, the server SIGKILLed and restarted mid-drain (AOF everysec), and
the workers' connections killed (`CLIENT KILL`) while they claim and settle.

Each test starts its own `redis-server` (free port, temp dir, AOF on), so killing it never
disturbs the shared dev server. Worker processes use real time (short leases), but every wait is
on an observable condition — a line a process wrote, a count on the server — and bounded.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import anyio.abc
import pytest

from engine import SystemClock
from engine.errors import JobNotFoundError, JobsError
from schemas.jobs import EnqueueRequest, EnqueueResult
from tests.postgres.builders import request
from tests.postgres.waiting import eventually
from tests.support.worker_processes import ids_after, lines, worker_process

pytest.importorskip("redis", reason="the redis extra is not installed")

from redis import Redis
from redis.exceptions import RedisError

from engine.drivers.redis import RedisDriver
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
REDIS_SERVER = shutil.which("redis-server")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not on PATH"),
]

# Past any finish time: an interval that counts every settled row.
EVER = 2**62


class RedisServer:
    """A redis-server process of this test's own: AOF on (fsync every second), no automatic RDB
    snapshots, so what a restart brings back is exactly what the AOF held. `aof=False` leaves
    only the snapshots a test takes itself (SAVE): the RDB-only setup."""

    def __init__(self, directory: Path, *, aof: bool = True, fsync: str = "everysec") -> None:
        self.directory = directory
        self.aof = aof
        self.fsync = fsync
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert REDIS_SERVER is not None
        log = (self.directory / "redis.log").open("ab")  # a file, never an unread pipe
        options = {
            "port": str(self.port),
            "bind": "127.0.0.1",
            "dir": str(self.directory),
            "appendonly": "yes" if self.aof else "no",
            "appendfsync": self.fsync,
            "save": "",
            "daemonize": "no",
        }
        self.process = subprocess.Popen(
            [REDIS_SERVER, *(part for k, v in options.items() for part in (f"--{k}", v))],
            stdout=log,
            stderr=log,
        )
        log.close()
        self.wait_ready()

    def wait_ready(self, within_s: float = 20) -> None:
        """Until PING answers (after the AOF is loaded: a loading server answers LOADING).
        Bounded polling, synchronous: the test's event loop has nothing to do meanwhile."""
        client = Redis(port=self.port, socket_connect_timeout=0.5, socket_timeout=0.5)
        deadline = time.monotonic() + within_s
        try:
            while True:
                assert self.process is not None and self.process.poll() is None, "server died"
                try:
                    if client.ping():
                        return
                except RedisError:
                    pass  # not listening yet, or still loading the AOF
                assert time.monotonic() < deadline, f"redis-server not up in {within_s} s"
                time.sleep(0.02)
        finally:
            client.close()

    def kill(self) -> None:
        """SIGKILL: no shutdown save, no goodbye to clients; what survives is what was written."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def client(self) -> Redis:
        return Redis(port=self.port, decode_responses=True)


@contextmanager
def own_server(
    tmp_path: Path, *, aof: bool = True, fsync: str = "everysec"
) -> Iterator[RedisServer]:
    directory = tmp_path / "redis"
    directory.mkdir()
    own = RedisServer(directory, aof=aof, fsync=fsync)
    own.start()
    try:
        yield own
    finally:
        own.kill()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    with own_server(tmp_path) as own:
        yield own


def now() -> int:
    return SystemClock().now_ms()


def noop_requests(now: int, count: int) -> list[EnqueueRequest]:
    return [request(now, name="noop", key=f"noop:{n}", input={"n": n}) for n in range(count)]


async def done_count(driver: RedisDriver) -> int:
    try:
        # Every done row (the stats count only a recent window's newest 1,000).
        return sum(c.done for c in (await driver.settled_counts(0, EVER)).values())
    except JobsError:
        return -1  # the server is away: not done, look again


async def states_of(driver: RedisDriver, ids: set[str]) -> dict[str, str]:
    """Each job's state; "missing" for one the server no longer has."""
    states: dict[str, str] = {}
    for job_id in ids:
        try:
            states[job_id] = (await driver.get(job_id)).state
        except JobNotFoundError:
            states[job_id] = "missing"
    return states


async def all_done(driver: RedisDriver, count: int, within: float) -> None:
    async def done() -> bool:
        return await done_count(driver) == count

    await eventually(done, within=within, every=0.05)


async def test_a_worker_killed_in_step_two_finishes_elsewhere_without_rerunning_step_one(
    server: RedisServer, tmp_path: Path
) -> None:
    driver = RedisDriver(server.url, clock=SystemClock())
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    try:
        (r,) = await driver.enqueue(
            [request(SystemClock().now_ms(), name="three_steps", key="three:7", input={"n": 7})]
        )
        async with worker_process(server.url, first, "--block-step=2", "--lease-ms", "1500") as w:
            await eventually(lambda: "step two started" in lines(first), within=30)
            w.send_signal(signal.SIGKILL)
            await w.wait()
        steps = await driver.load_steps(r.run_id)
        assert [(s.name, s.status) for s in steps] == [("one", "completed")]
        assert (await driver.get(r.id)).state == "running"  # a dead holder's lease, unsettled
        async with worker_process(server.url, second, "--lease-ms", "1500"):

            async def done() -> bool:
                return (await driver.get(r.id)).state == "done"

            await eventually(done, within=30, every=0.05)
        record = await driver.get(r.id)
    finally:
        await driver.close()
    assert lines(first) == ["worker up", "step one 7", "step two started"]
    # Step one replayed from its stored result, not run again; two and three ran once.
    assert lines(second) == ["worker up", "step two 7", "step three 7", f"acked {r.id}"]
    assert record.attempt == 2
    assert record.output == "step one 7 | step two 7 | step three 7"


async def test_two_worker_processes_run_two_thousand_jobs_exactly_once(
    server: RedisServer, tmp_path: Path
) -> None:
    driver = RedisDriver(server.url, clock=SystemClock())
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    try:
        async with (
            worker_process(server.url, logs[0], "--concurrency", "8"),
            worker_process(server.url, logs[1], "--concurrency", "8"),
        ):
            enqueued = await driver.enqueue(noop_requests(SystemClock().now_ms(), 2_000))
            await all_done(driver, 2_000, within=45)
        attempts = {(await driver.get(r.id)).attempt for r in enqueued}
    finally:
        await driver.close()
    ran = ids_after("ran ", logs)
    assert len(ran) == 2_000
    assert sorted(ran) == sorted(r.id for r in enqueued)  # every job, each exactly once
    assert attempts == {1}  # and each claimed once
    assert all(ids_after("ran ", [log]) for log in logs)  # both workers took a share


@pytest.fixture
def always_server(tmp_path: Path) -> Iterator[RedisServer]:
    with own_server(tmp_path, fsync="always") as own:
        yield own


async def test_a_server_killed_and_restarted_mid_drain_loses_no_acknowledged_job(
    always_server: RedisServer, tmp_path: Path
) -> None:
    """The rule, with AOF `always` and the server SIGKILLed (not the machine). Not `everysec`:
    there, while a background fsync is still running (a busy disk), redis answers writes it
    holds back from the file for up to 2 s, and a kill loses them (README, Redis):
    1. every job whose ack the server answered before the kill is still done after it;
    2. every job ends done;
    3. a job ran twice only if its ack had NOT been answered before the kill: it was claimed
       then (running, or waiting in the worker's prefetch) and its ack failed while the server
       was away, so its lease ran out and it ran again — at least once for those, exactly once
       for every job whose ack the server answered.
    """
    server = always_server
    driver = RedisDriver(server.url, clock=SystemClock())
    log = tmp_path / "worker.log"
    count = 2_000
    enqueued: list[EnqueueResult] = []
    try:
        enqueued = await driver.enqueue(noop_requests(SystemClock().now_ms(), count))
        async with worker_process(
            server.url, log, "--concurrency", "8", "--lease-ms", "2000", "--noop-sleep-ms", "2"
        ):
            await eventually(lambda: len(ids_after("acked ", [log])) >= 300, within=30)
            server.kill()
            acked_before = set(ids_after("acked ", [log]))  # answered by a server now dead
            assert await done_count(driver) == -1  # really away
            server.start()  # same port, same dir: the AOF replays
            states = await states_of(driver, acked_before)
            # 1. nothing acknowledged was lost (one lost and redone since would fail 3. below)
            assert states == dict.fromkeys(acked_before, "done")
            await all_done(driver, count, within=45)
    finally:
        await driver.close()
    assert 300 <= len(acked_before) < count  # killed mid-drain
    ran = ids_after("ran ", [log])
    assert set(ran) == {r.id for r in enqueued}  # 2. every job ran (and is done: all_done)
    runs = Counter(ran)
    twice = {job_id for job_id, n in runs.items() if n > 1}
    assert not twice & acked_before  # 3. none answered before the kill ran again
    # A job whose ack was answered is never run again, so no job's ack is answered twice. (Not
    # "exactly once": an ack applied just before the kill may lose its reply, and its resend
    # then finds the job done already.)
    assert set(Counter(ids_after("acked ", [log])).values()) == {1}


async def test_connections_killed_while_claiming_and_settling_lose_and_repeat_nothing(
    server: RedisServer, tmp_path: Path
) -> None:
    """`CLIENT KILL TYPE normal` (and pubsub) from another client, every 20 ms while a worker
    drains the first 3/4 of 1,000 jobs: claims and acks lose their connections mid-flight and
    are resent on a new one. A resent ack finds its job already done; a claim whose reply was
    lost leaves its jobs to their lease (2 s) — so every job ends done, and no attempt runs twice.
    A job runs again only in a later attempt: the cuts held its ack past its lease (on a loaded
    machine), and the lease ran out."""
    driver = RedisDriver(server.url, clock=SystemClock())
    log = tmp_path / "worker.log"
    count = 1_000
    killed = 0
    try:
        # Attempts to spare: each claim whose reply is lost costs one (the job waits out its
        # lease unrun), and that may happen to one job more than once here.
        many = [r._replace(max_attempts=20) for r in noop_requests(now(), count)]
        enqueued = await driver.enqueue(many)
        async with worker_process(
            server.url, log, "--concurrency", "8", "--lease-ms", "2000", "--noop-sleep-ms", "5"
        ):
            killer = server.client()
            try:
                with anyio.fail_after(45):
                    # Cut while most of the drain is ahead; the rest shows it recovers.
                    while len(ids_after("ran ", [log])) < count * 3 // 4:
                        killed += int(
                            killer.execute_command("CLIENT KILL TYPE normal SKIPME yes")
                        ) + int(killer.execute_command("CLIENT KILL TYPE pubsub"))
                        await anyio.sleep(0.02)
            finally:
                killer.close()
            await all_done(driver, count, within=30)
    finally:
        await driver.close()
    assert killed >= 20  # the connections really were cut, again and again
    runs = Counter(tuple(line.split()[1:3]) for line in lines(log) if line.startswith("ran "))
    assert set(runs.values()) == {1}  # no attempt of any job ran twice
    assert {job_id for job_id, _ in runs} == {r.id for r in enqueued}  # every job ran


async def test_with_rdb_only_a_restart_rolls_back_to_the_last_snapshot(tmp_path: Path) -> None:
    """What RDB alone promises, as the README states it: a SIGKILLed server comes back as its
    last snapshot. Acks answered after it are undone (those jobs run again: at least once, not
    exactly once) and jobs enqueued after it are gone, although their enqueue was answered."""
    with own_server(tmp_path, aof=False) as server:
        driver = RedisDriver(server.url, clock=SystemClock())
        log = tmp_path / "worker.log"
        count = 500
        try:
            enqueued = await driver.enqueue(noop_requests(SystemClock().now_ms(), count))
            server.client().save()  # the snapshot: every job ready, none run
            (late,) = await driver.enqueue(
                [request(SystemClock().now_ms(), name="noop", key="late", input={"n": -1})]
            )
            async with worker_process(server.url, log, "--concurrency", "8"):
                await eventually(lambda: len(ids_after("acked ", [log])) >= 100, within=30)
                server.kill()
                acked_before = set(ids_after("acked ", [log]))
                server.start()
                # Enqueued (and answered) after the snapshot: gone.
                assert await states_of(driver, {late.id}) == {late.id: "missing"}
                await all_done(driver, count, within=45)
        finally:
            await driver.close()
    runs = Counter(ids_after("ran ", [log]))
    assert set(runs) == {r.id for r in enqueued}
    # Acknowledged, undone by the restart, and so run again (the worker redoes them at once:
    # their states right after the restart would race it, their second run does not).
    assert all(runs[j] >= 2 for j in acked_before)
